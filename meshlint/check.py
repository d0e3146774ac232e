"""One config through the whole pipeline: load -> dialect -> topology -> resolve -> facts -> rules."""

from __future__ import annotations

import os
from typing import NamedTuple

from meshlint.dialects import DIALECTS, detect
from meshlint.dialects.base import Resolution, Spec
from meshlint.engine import Skip, run_rules
from meshlint.errors import InputError
from meshlint.facts import build_facts
from meshlint.findings import SEVERITY_RANK, Finding
from meshlint.rules import Rule
from meshlint.source import Source, parse_source, read_source
from meshlint.topology import (
    CliTopology,
    Hint,
    Topology,
    comment_hints,
    directive_hints,
    filename_hint,
    resolve_topology,
)

SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"}


class Options(NamedTuple):
    """Everything that decides how one file is checked (see settings.Planner for how it is built)."""

    rules: list
    dialect: str | None = None
    topology: CliTopology = CliTopology()
    file_hint: Hint | None = None       # per-file topology from the project configuration
    profile_hint: Hint | None = None    # the project's cluster profile: lowest precedence
    severity: dict = {}                 # rule code or name -> severity override
    fail_on: str = "error"
    report_unused: bool = False         # report suppression comments that suppress nothing
    models: dict | None = None          # model table (torchtitan flavors); None: the built-in one
    gpu_memory_gib: float = 80.0        # what the memory estimate compares with
    torchtitan_version: str | None = None  # --torchtitan-version / project setting: the semantics of registries
    torchtitan_root: str | None = None     # --torchtitan-root: the checkout registries and launch lines refer to


class FileReport:
    """Everything known about one file after a check (or why it could not be checked)."""

    def __init__(self, path: str, status: str, dialect: str | None = None, note: str | None = None,
                 error: InputError | None = None, source: Source | None = None, spec: Spec | None = None,
                 topology: Topology | None = None, resolution: Resolution | None = None):
        self.path = path
        self.status = status              # checked | skipped | error
        self.dialect = dialect
        self.note = note                  # why a file was skipped
        self.error = error
        self.source = source
        self.spec = spec
        self.topology = topology
        self.resolution = resolution
        self.findings: list = []
        self.suppressed: list = []        # findings silenced by '# meshlint: ignore[...]' comments
        self.skips: list = []
        self.fail_on = "error"            # this file's --fail-on (the project configuration may set it)
        self.diff = None                  # MeshDiff against --diff-base, when asked and the file changed
        self.diff_note: str | None = None  # why there is no diff (new file, unchanged)
        self.diff_base: str | None = None  # the revision --diff-base compared with

    def worst(self) -> int:
        if self.status == "error":
            return SEVERITY_RANK["error"]
        return max((SEVERITY_RANK[f.severity] for f in self.findings), default=-1)


# Explicit inputs besides TOML: torchtitan registries (any .py; "file.py::function" picks one),
# launch scripts, and the JSON a run saves with --debug.save_config_file.
REGISTRY_FILE = "config_registry.py"   # what a directory walk picks up besides *.toml
SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm")


# The framework version a TOML config is read as (registries choose theirs: inputs/units.py).
TOML_VERSIONS = {
    "torchtitan": ("0.2.x", "a TOML config: torchtitan read TOML configs up to v0.2.x (they became Python "
                            "registries at 9810191bb, 2026-02-23)"),
    "kempnerforge": ("5666d0d", "KempnerForge TOML, as of the snapshot meshlint models (5666d0d, 2026-06-30)"),
}


def input_kind(path: str) -> str:
    """toml | registry | script | saved: how an input path is read (by its name, never its content)."""
    file = path.split("::", 1)[0]
    if "::" in path or file.endswith(".py"):
        return "registry"
    if file.endswith(SCRIPT_SUFFIXES):
        return "script"
    if file.endswith(".json"):
        return "saved"
    return "toml"


def collect_paths(args: list[str]) -> list[str]:
    """Expand directories to the TOML files and torchtitan config registries below them;
    keep explicit files (any kind, see :func:`input_kind`) as given."""
    out: list[str] = []
    for arg in args:
        if os.path.isdir(arg):
            found = []
            for root, dirs, files in os.walk(arg):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                found += [os.path.join(root, f) for f in files if f.endswith(".toml") or f == REGISTRY_FILE]
            out.extend(sorted(found))
        else:
            out.append(arg)
    return list(dict.fromkeys(out))


def analyse_all(path: str, options: Options, raw: bytes | None = None, name: str | None = None) -> list:
    """Every config an input path holds (a registry has one per function, a launch script one
    per launch line), each analysed up to (not including) the rules."""
    kind = input_kind(path)
    if kind == "toml":
        return [analyse(path, options, raw, name)]
    from meshlint.inputs import units

    return [report for report in units.analyse_input(path, kind, options, raw, name)]


def check_all(path: str, options: Options, raw: bytes | None = None, name: str | None = None) -> list:
    """:func:`check_file` for every config an input path holds."""
    return [run_checks(report, options) for report in analyse_all(path, options, raw, name)]


def analyse(path: str, options: Options, raw: bytes | None = None, name: str | None = None) -> FileReport:
    """Everything up to (not including) the rules: used by check, explain and diff.

    ``raw`` gives the file's content instead of reading ``path`` (an old
    version read from git); ``path`` is then only its display name.
    A registry path names one config (``file.py::function``, or a file with one function).
    """
    if input_kind(path) != "toml":
        reports = analyse_all(path, options, raw, name)
        if len(reports) == 1:
            return reports[0]
        from meshlint.inputs.units import several

        return several(path, reports)
    try:
        source = read_source(path) if raw is None else parse_source(path, raw, name)
        dialect = options.dialect or detect(source.data)
    except InputError as exc:
        return FileReport(path, "error", error=exc)
    if dialect is None:
        return FileReport(path, "skipped", source=source,
                          note="no [distributed], [parallelism] or [mesh] section: not a training config")
    module = DIALECTS[dialect]
    spec = module.read(source)
    if dialect in TOML_VERSIONS:
        from meshlint.dialects import schema_check

        version, why = TOML_VERSIONS[dialect]
        spec.framework = {"name": dialect, "version": version, "decided_by": why}
        schema_check.apply(spec, source.data)
    if dialect == "torchtitan":
        from meshlint import models

        module.attach_model(spec, options.models if options.models is not None else models.builtin())
    topo = topology_for(source, spec, options.topology, options.file_hint, options.profile_hint)
    topo.gpu_memory_gib = options.gpu_memory_gib
    resolution = module.resolve(spec, topo.world_size)
    return FileReport(path, "checked", dialect=dialect, source=source, spec=spec, topology=topo,
                      resolution=resolution)


def check_file(path: str, options: Options, raw: bytes | None = None, name: str | None = None) -> FileReport:
    return run_checks(analyse(path, options, raw, name), options)


def run_checks(report: FileReport, options: Options) -> FileReport:
    """The rules (and suppressions) on an analysed config."""
    if report.status != "checked":
        return report
    facts = build_facts(report.spec, report.topology, report.resolution)
    first, late = _split_late(options.rules)
    findings, skips = run_rules(first, facts, report.source.locate)
    if any(f.severity == "error" for f in findings) and _proposes_degrees(first):
        # Help lines that propose degrees draw on one search of the layouts that pass every error
        # rule at once, so two findings of a config never propose contradictory values (issue 12).
        facts["choices"] = degree_choices(report, options)
        if facts["choices"] is not None:
            findings, skips = run_rules(first, facts, report.source.locate)
    file_of = getattr(report.source, "file_of", None)
    if file_of is not None:  # a registry config: findings point into the file that sets the value
        findings = [f._replace(file=file_of(f.key, f.line, f.col)) for f in findings]
    if options.severity:
        findings = [_override(f, options.severity) for f in findings]
    report.skips = skips
    if "meshlint" not in report.source.text:
        report.findings = findings
        return report
    from meshlint import suppress  # only files that mention meshlint: most never need it

    suppressions = suppress.parse(report.source)
    report.findings, report.suppressed, used = suppress.apply(suppressions, findings)
    if options.report_unused and late:
        known = {key: r for r in options.rules for key in (r.code, r.name)}
        facts["unused_suppressions"] = suppress.unused(suppressions, used, report.suppressed, known)
        extra, _ = run_rules(late, facts, report.source.locate)
        if file_of is not None:
            extra = [f._replace(file=file_of(f.key, f.line, f.col)) for f in extra]
        report.findings = sorted(report.findings + extra, key=Finding.sort_key)
    return report


_SPLITS: dict[int, tuple] = {}


def _split_late(rules: list) -> tuple[list, list]:
    """(rules to run first, rules that read which suppressions went unused: ML901 runs after the others).

    Worked out once per rule list, not once per file.
    """
    hit = _SPLITS.get(id(rules))
    if hit is None or hit[0] is not rules:
        late = [r for r in rules if r.foreach is not None and "unused_suppressions" in r.foreach.free_names()]
        if len(_SPLITS) >= 4:  # a long-lived process loads many rule lists: keep the cache bounded
            _SPLITS.clear()
        hit = _SPLITS[id(rules)] = (rules, [r for r in rules if r not in late] if late else rules, late)
    return hit[1], hit[2]


CHOICES_BUDGET_S = 0.25  # the search behind `choices`; past it, help lines use their own arithmetic


def degree_choices(report: FileReport, options: Options) -> dict | None:
    """``{degree: values}`` that appear in some layout passing every error rule on this config's
    own world; None when the world is unknown, the search cannot start, or it runs out of time."""
    if report.topology.world_size is None:
        return None
    import time

    from meshlint.errors import MeshlintError
    from meshlint.solve.valid import degree_choices as search

    try:
        return search(report, options._replace(rules=[r for r in options.rules if r.severity == "error"]),
                      deadline=time.perf_counter() + CHOICES_BUDGET_S)
    except MeshlintError:
        return None
    except Exception:  # noqa: BLE001 - advisory: a failure of the search never fails the check
        return None


_PROPOSERS: dict[int, tuple] = {}


def _proposes_degrees(rules: list) -> bool:
    """Whether any of these rules reads ``choices`` (worked out once per rule list)."""
    hit = _PROPOSERS.get(id(rules))
    if hit is None or hit[0] is not rules:
        if len(_PROPOSERS) >= 4:  # a long-lived process loads many rule lists: keep the cache bounded
            _PROPOSERS.clear()
        hit = _PROPOSERS[id(rules)] = (rules, any(_reads_choices(r) for r in rules))
    return hit[1]


def _reads_choices(rule: Rule) -> bool:
    texts = [t.source for _w, t in rule.help] + [getattr(e, "source", "") for e in rule.lets.values()]
    return any("choices" in (text or "") for text in texts)


def _override(finding: Finding, severity: dict) -> Finding:
    level = severity.get(finding.code) or severity.get(finding.name)
    return finding._replace(severity=level) if level and level != finding.severity else finding


def topology_for(source: Source, spec: Spec, cli: CliTopology, file_hint: Hint | None = None,
                 profile_hint: Hint | None = None, launch_hints: tuple = ()) -> Topology:
    """Merge every source of world size and node shape, highest precedence first
    (a launch line's own --nnodes/--nproc_per_node rank with the file's directives)."""
    directives, problems = directive_hints(source.comments)
    hints = [cli.hint(), *launch_hints, *directives, file_hint, *spec.hints, filename_hint(source.name),
             *comment_hints(source.comments), profile_hint]
    topo = resolve_topology(hints, cli.placement)
    if profile_hint is not None:  # the cluster profile is a default: overriding it is not a disagreement
        topo.conflicts = [c for c in topo.conflicts if c[3] != profile_hint.source]
    from meshlint.topology import comment_worlds

    topo.world_candidates = comment_worlds(source.comments) if topo.world_size is None else []
    topo.directive_problems = problems
    return topo


def rules_by_code(rules: list[Rule]) -> dict:
    return {r.code: r for r in rules}


def finding_file(report: FileReport, finding: Finding) -> str:
    """The file a finding's line is in: its own (registry configs), else the report's file
    (``reg.py::fn`` -> ``reg.py``; a launch script's ``run.sh:12::fn`` -> ``run.sh``)."""
    if finding.file:
        return finding.file
    file = report.path.split("::", 1)[0]
    head, sep, tail = file.rpartition(":")
    return head if sep and tail.isdigit() and "::" in report.path else file


def input_error_finding(error: InputError) -> Finding:
    return Finding(error.code, error.name, "error", error.message, error.help, None, error.line, error.col)


def skip_summary(skips: list[Skip]) -> dict:
    out: dict[str, list[str]] = {}
    for s in skips:
        out.setdefault(s.needs, []).append(s.code)
    return out
