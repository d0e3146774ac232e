"""One config through the whole pipeline: load -> dialect -> topology -> resolve -> facts -> rules."""

from __future__ import annotations

from meshlint.record import Record
from meshlint.errors import InputError
from meshlint.engine.filereport import (  # noqa: F401 - where they always were: imported from here by many modules
    REGISTRY_FILE,
    SCRIPT_SUFFIXES,
    SKIP_DIRS,
    FileReport,
    collect_paths,
    finding_file,
    input_error_finding,
    input_kind,
)
from meshlint.engine.findings import Finding
from meshlint.engine.resolve import analyse_parsed
from meshlint.engine.rulelist import rules_for
from meshlint.mesh.topology import CliTopology, Hint

TYPE_CHECKING = False

if TYPE_CHECKING:  # the pipeline's modules are imported where they run: a run answered from the
    # results cache (meshlint/cli/results_cache.py) imports this module for FileReport and never needs them
    from meshlint.frameworks.base import Resolution
    from meshlint.engine.rules import Rule


class Options(Record):
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
    gpu_memory_source: str = "default"  # where that came from (memory_check.capacity_source)
    torchtitan_version: str | None = None  # --torchtitan-version / project setting: the semantics of configs
    torchtitan_root: str | None = None     # --torchtitan-root: the checkout registries and launch lines refer to
    script_call: object = None             # inputs/script_call.ScriptCall: the script is read as this call runs it


def analyse_all(path: str, options: Options, raw: bytes | None = None, name: str | None = None) -> list:
    """Every config an input path holds (a registry has one per function, a launch script one
    per launch line), each analysed up to (not including) the rules."""
    kind = input_kind(path)
    if kind in ("toml", "yaml"):
        return [analyse(path, options, raw, name)]
    from meshlint.engine import units

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
    if input_kind(path) == "yaml":
        from meshlint.engine.accelerate_units import analyse_yaml

        return analyse_yaml(path, options, raw, name)
    if input_kind(path) != "toml":
        reports = analyse_all(path, options, raw, name)
        if len(reports) == 1:
            return reports[0]
        from meshlint.engine.units import several

        return several(path, reports)
    from meshlint.frameworks.dialects import detect
    from meshlint.inputs.source import parse_source, read_source

    try:
        source = read_source(path) if raw is None else parse_source(path, raw, name)
        dialect = options.dialect or detect(source.data)
    except InputError as exc:
        return FileReport(path, "error", error=exc)
    if dialect is None:
        from meshlint.frameworks.dialects import older_torchtitan
        from meshlint.frameworks.versions import ids

        old = older_torchtitan(source.data)
        if old:
            return FileReport(path, "skipped", source=source, dialect="torchtitan",
                              note=f"a torchtitan config from before v0.1.0 (its degrees are in [training]: "
                                   f"{', '.join(old)}): that torchtitan version is not modelled (meshlint models "
                                   f"torchtitan {', '.join(ids('torchtitan'))}), so nothing was checked; "
                                   "torchtitan 0.1.0 reads them from [parallelism]")
        return FileReport(path, "skipped", source=source,
                          note="no [distributed], [parallelism] or [mesh] section: not a training config")
    return analyse_parsed(path, source, dialect, options)


def check_file(path: str, options: Options, raw: bytes | None = None, name: str | None = None) -> FileReport:
    return run_checks(analyse(path, options, raw, name), options)


def run_checks(report: FileReport, options: Options) -> FileReport:
    """The rules (and suppressions) on an analysed config."""
    if report.status != "checked":
        return report
    from meshlint.engine.run import run_rules
    from meshlint.engine.facts import build_facts

    facts = build_facts(report.spec, report.topology, report.resolution)
    launch_notes = getattr(getattr(report.source, "launch", None), "notes", None)
    if launch_notes and report.resolution is not None:  # how the launch line was read: JSON notes, explain
        report.resolution.notes[:0] = [f"launch: {n}" for n in launch_notes
                                       if f"launch: {n}" not in report.resolution.notes]
    from meshlint.estimate.memory_check import file_memory, rule_facts

    report.memory = file_memory(report, options)
    facts["memory"].update(rule_facts(report.memory))
    from meshlint.engine.expr.expression import compiled_for

    compiled_for(facts["dialect"])  # the dialect's compiled functions first: they answer _split_late's free_names
    first, late = _split_late(rules_for(options.rules, facts["dialect"]))
    findings, skips = run_rules(first, facts, report.source.locate)
    if any(f.severity == "error" for f in findings) and _needs_choices(first, findings, facts["dialect"]):
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
    from meshlint.inputs import suppress  # only files that mention meshlint: most never need it

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
        # the name in the source text first: free_names() builds the tree, and few foreach rules read it
        late = [r for r in rules if r.foreach is not None and "unused_suppressions" in r.foreach.source
                and "unused_suppressions" in r.foreach.free_names()]
        if len(_SPLITS) >= 4:  # a long-lived process loads many rule lists: keep the cache bounded
            _SPLITS.clear()
        hit = _SPLITS[id(rules)] = (rules, [r for r in rules if r not in late] if late else rules, late)
    return hit[1], hit[2]


# The search behind `choices`, bounded by work, never by a clock (a check's output must not depend on the machine's
# load): layouts enumerated, layouts verified against every error rule. Past either, help lines use their own
# arithmetic. The fixtures' largest search takes 1,043 and 71 (~40 ms).
CHOICES_BUDGET = (32_768, 256)


def degree_choices(report: FileReport, options: Options) -> dict | None:
    """``{degree: values}`` that appear in some layout passing every error rule on this config's
    own world; None when the world is unknown, the search cannot start, or it spends its budget of work."""
    if report.topology.world_size is None or report.dialect == "megatron":  # the search has no Megatron layout space
        return None
    from meshlint.errors import MeshlintError
    from meshlint.engine.search.valid import degree_choices as search

    try:
        rules = rules_for(options.rules, report.dialect)
        return search(report, options._replace(rules=[r for r in rules if r.severity == "error"]),
                      budget=CHOICES_BUDGET)
    except MeshlintError:
        return None
    except Exception:  # noqa: BLE001 - advisory: a failure of the search never fails the check
        report.cacheable = False
        return None


_READERS: dict[tuple, tuple] = {}


def _needs_choices(rules: list, findings: list, dialect: str) -> bool:
    """Whether the search behind ``choices`` can change what these findings say: a finding's rule reads
    it in its help, or some rule that runs on the dialect might read it in what decides or words a finding
    (then always). Worked out once per rule list and dialect, over the rules that apply to it."""
    key = (id(rules), dialect)
    hit = _READERS.get(key)
    if hit is None or hit[0] is not rules:
        if len(_READERS) >= 12:  # a long-lived process loads many rule lists: keep the cache bounded
            _READERS.clear()
        helped, anywhere = set(), False
        for rule in rules:
            if not rule.applies_to(dialect):
                continue
            use = _reads_choices(rule)
            if use == "help":
                helped.add(rule.code)
            anywhere = anywhere or use == "verdict"
        hit = _READERS[key] = (rules, frozenset(helped), anywhere)
    return hit[2] or any(f.code in hit[1] for f in findings)


def _reads_choices(rule: Rule) -> str | None:
    """Where a rule reads ``choices``, by its text (a mention in a string counts too: never too few):
    "verdict" (check, when, foreach, message or key, directly or through its lets), "help", or None."""
    lets = {name: e.source for name, e in rule.lets.items()}
    reading = {name for name, text in lets.items() if "choices" in text}
    if not reading and not any("choices" in (t.source if c is None else c.source + t.source) for c, t in rule.help):
        return None
    grew = True
    while grew:  # lets that read lets that read choices
        grew = False
        for name, text in lets.items():
            if name not in reading and any(_word_in(r, text) for r in reading):
                reading.add(name)
                grew = True
    verdict = [getattr(x, "source", "") for x in (rule.check, rule.when, rule.foreach, rule.message, rule.key)]
    names = ["choices", *reading]
    if any(_word_in(n, text or "") for text in verdict for n in names):
        return "verdict"
    return "help"


def _word_in(word: str, text: str) -> bool:
    """``re.search(rf"\\b{re.escape(word)}\\b", text)`` without compiling a pattern per word (~0.6 M instructions
    each): ``word`` somewhere with a word boundary (``\\w`` is ``isalnum()`` or ``_``) at both its ends."""
    if not word:
        import re

        return re.search(r"\b\b", text) is not None
    at = text.find(word)
    while at >= 0:
        if _boundary(text, at) and _boundary(text, at + len(word)):
            return True
        at = text.find(word, at + 1)
    return False


def _boundary(text: str, k: int) -> bool:
    before = k > 0 and (text[k - 1].isalnum() or text[k - 1] == "_")
    after = k < len(text) and (text[k].isalnum() or text[k] == "_")
    return before != after


def _override(finding: Finding, severity: dict) -> Finding:
    level = severity.get(finding.code) or severity.get(finding.name)
    return finding._replace(severity=level) if level and level != finding.severity else finding

