"""Project configuration: ``[tool.meshlint]`` in pyproject.toml, or a standalone meshlint.toml.

Found by walking up from each checked file to the repository root (the first
directory holding ``.git``) or the filesystem root; the nearest file wins, as
with ruff. ``meshlint.toml`` takes the same keys at its top level.

    [tool.meshlint]
    gpus_per_node = 8              # the cluster profile: defaults for every config
    nodes = 4                      # (or world_size = 32)
    placement = "block"
    rules = ["team-rules"]         # extra rule directories, relative to this file

    [tool.meshlint.lint]
    select = ["ALL"]               # codes, code prefixes ("ML2") or names
    extend-select = []
    ignore = ["ML312", "partial-last-node"]
    severity = { ML203 = "error" }
    fail-on = "warning"
    report-unused-suppressions = true

    [tool.meshlint.per-file."configs/wide.toml"]   # a path or glob relative to this file
    world_size = 16
    ignore = ["ML205"]

Unknown keys are errors (exit 2) naming the file, the line and a close match.
Command-line flags override everything here.
"""

from __future__ import annotations

import os

from meshlint.record import Record
from meshlint.errors import MeshlintError

FAIL_ON = ("error", "warning", "info", "never")
TOPOLOGY_KEYS = {"world_size": int, "nodes": int, "gpus_per_node": int, "placement": str, "dialect": str}
TOP_KEYS = {**TOPOLOGY_KEYS, "rules": list, "lint": dict, "per-file": dict, "models": dict,
            "gpu_memory_gib": (int, float), "torchtitan-version": str, "torchtitan-root": str, "cluster": dict}
LINT_KEYS = {"select": list, "extend-select": list, "ignore": list, "severity": dict, "fail-on": str,
             "report-unused-suppressions": bool}
PER_FILE_KEYS = {**TOPOLOGY_KEYS, "ignore": list, "severity": dict}
CHOICES = {"placement": ("block", "cyclic"), "dialect": ("kempnerforge", "torchtitan", "native"), "fail-on": FAIL_ON}


_WORDS = {dict: "a table", list: "an array", str: "a string", bool: "true or false", int: "an integer"}


class ConfigError(MeshlintError):
    """An invalid project configuration (exit 2)."""


class PerFile(Record):
    pattern: str
    settings: dict


class ProjectConfig(Record):
    path: str | None                    # the file it came from (None: no configuration found)
    root: str                           # directory that relative paths are resolved against
    topology: dict = {}                 # world_size / nodes / gpus_per_node / placement / dialect
    rules: tuple = ()                   # extra rule directories (absolute)
    select: tuple = ("ALL",)
    extend_select: tuple = ()
    ignore: tuple = ()
    severity: dict = {}
    fail_on: str | None = None
    report_unused_suppressions: bool = False
    per_file: tuple = ()                # PerFile, in the order written
    models: dict = {}                   # (name, flavor) -> facts: extends the built-in model table
    gpu_memory_gib: float | None = None
    torchtitan_version: str | None = None  # the semantics torchtitan registries are read with
    torchtitan_root: str | None = None     # the checkout launch lines refer to (absolute)
    cluster: dict = {}                     # [tool.meshlint.cluster]: node and fabric for suggest's cost model

    def for_file(self, path: str) -> dict:
        """Per-file settings that apply to ``path`` (later patterns override earlier ones)."""
        merged: dict = {}
        rel = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        if self.per_file:
            import fnmatch  # only for per-file patterns: it imports re
        for entry in self.per_file:
            if rel == entry.pattern or fnmatch.fnmatch(rel, entry.pattern) or \
                    fnmatch.fnmatch(os.path.basename(path), entry.pattern):
                for key, value in entry.settings.items():
                    if key == "ignore":
                        merged["ignore"] = merged.get("ignore", ()) + tuple(value)
                    elif key == "severity":
                        merged["severity"] = {**merged.get("severity", {}), **value}
                    else:
                        merged[key] = value
        return merged


NO_CONFIG = ProjectConfig(None, os.getcwd())


class Finder:
    """Finds (and caches) the configuration that governs each checked file."""

    def __init__(self, explicit: str | None = None):
        self.explicit = load(explicit) if explicit else None
        self._by_dir: dict[str, ProjectConfig] = {}

    def for_path(self, path: str) -> ProjectConfig:
        if self.explicit is not None:
            return self.explicit
        directory = os.path.dirname(os.path.abspath(path))
        seen = []
        config = None
        while True:
            if directory in self._by_dir:
                config = self._by_dir[directory]
                break
            seen.append(directory)
            config = _config_in(directory)
            if config is not None or os.path.isdir(os.path.join(directory, ".git")):
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        config = config or ProjectConfig(None, directory)
        for d in seen:
            self._by_dir[d] = config
        return config


def _config_in(directory: str) -> ProjectConfig | None:
    standalone = os.path.join(directory, "meshlint.toml")
    if os.path.isfile(standalone):
        return load(standalone)
    pyproject = os.path.join(directory, "pyproject.toml")
    if os.path.isfile(pyproject):
        return load(pyproject, required=False)
    return None


def load(path: str, required: bool = True) -> ProjectConfig | None:
    """Read a meshlint.toml or pyproject.toml; None when a pyproject has no [tool.meshlint]."""
    from meshlint.errors import InputError
    from meshlint.inputs.source import decode, parse_toml, read_bytes

    try:  # a FIFO named pyproject.toml, a huge or deeply nested file: refused, not read
        text = decode(read_bytes(path))
        data = parse_toml(text)
    except InputError as exc:
        if exc.message == "no such file":
            raise ConfigError(f"{path}: configuration file not found") from None
        where = f" (line {exc.line})" if exc.line > 1 else ""
        raise ConfigError(f"{path}: {exc.message}{where}") from None
    if os.path.basename(path) == "pyproject.toml":
        section = data.get("tool", {}).get("meshlint") if isinstance(data.get("tool"), dict) else None
        if section is None:
            if required:
                raise ConfigError(f"{path}: no [tool.meshlint] section")
            return None
        prefix = ("tool", "meshlint")
    else:
        section, prefix = data, ()
    return _parse(section, path, text, prefix)


def _parse(section, path: str, text: str, prefix: tuple) -> ProjectConfig:
    where = _Where(path, text, prefix)
    if not isinstance(section, dict):
        raise where.error((), "must be a table")
    _check_keys(section, TOP_KEYS, where, ())
    root = os.path.dirname(os.path.abspath(path))
    topology = {k: section[k] for k in TOPOLOGY_KEYS if k in section}
    _check_values(topology, where, ())
    rules = tuple(os.path.normpath(os.path.join(root, _string(d, where, ("rules",)))) for d in section.get("rules", []))
    lint = section.get("lint", {})
    _check_keys(lint, LINT_KEYS, where, ("lint",))
    if "fail-on" in lint and lint["fail-on"] not in FAIL_ON:
        raise where.error(("lint", "fail-on"), f"{lint['fail-on']!r} is not one of {', '.join(FAIL_ON)}")
    severity = _severity(lint.get("severity", {}), where, ("lint", "severity"))
    per_file = []
    for pattern, settings in section.get("per-file", {}).items():
        _check_keys(settings, PER_FILE_KEYS, where, ("per-file", pattern))
        _check_values(settings, where, ("per-file", pattern))
        if "severity" in settings:
            _severity(settings["severity"], where, ("per-file", pattern, "severity"))
        per_file.append(PerFile(pattern, settings))
    models: dict = {}
    if "models" in section:
        from meshlint.frameworks.models import ModelTableError, parse_table

        try:
            models = parse_table(section["models"], f"{path}: models")
        except ModelTableError as exc:
            raise ConfigError(str(exc)) from None
    gpu = section.get("gpu_memory_gib")
    if gpu is not None and not 1 <= gpu <= 10_000:
        raise where.error(("gpu_memory_gib",), "must be a number of GiB between 1 and 10,000")
    tt_version = section.get("torchtitan-version")
    if tt_version is not None:
        from meshlint.frameworks import versions

        _string(tt_version, where, ("torchtitan-version",))
        if versions.canonical("torchtitan", tt_version, strict=False) is None:
            raise where.error(("torchtitan-version",), f"{tt_version!r} is not a torchtitan version meshlint models "
                                                       f"({', '.join(versions.ids('torchtitan'))})")
    cluster = section.get("cluster") or {}
    if cluster:
        from meshlint.estimate.cost import check_cluster

        problem = check_cluster(cluster)
        if problem:
            raise where.error(("cluster",), problem)
    tt_root = section.get("torchtitan-root")
    if tt_root is not None:
        tt_root = os.path.normpath(os.path.join(root, _string(tt_root, where, ("torchtitan-root",))))
    return ProjectConfig(
        path=path, root=root, topology=topology, rules=rules, models=models, gpu_memory_gib=gpu,
        torchtitan_version=tt_version, torchtitan_root=tt_root, cluster=dict(cluster),
        select=tuple(_strings(lint.get("select", ["ALL"]), where, ("lint", "select"))),
        extend_select=tuple(_strings(lint.get("extend-select", []), where, ("lint", "extend-select"))),
        ignore=tuple(_strings(lint.get("ignore", []), where, ("lint", "ignore"))),
        severity=severity, fail_on=lint.get("fail-on"),
        report_unused_suppressions=lint.get("report-unused-suppressions", False),
        per_file=tuple(per_file),
    )


class _Where:
    """Names a key of the configuration file with its line, for error messages."""

    def __init__(self, path: str, text: str, prefix: tuple):
        self.path, self.text, self.prefix = path, text, prefix

    def error(self, key: tuple, message: str) -> ConfigError:
        from meshlint.inputs.tomlpos import scan

        full = self.prefix + key
        (line, _), _ = scan(self.text).locate(full)
        dotted = ".".join(str(k) for k in full) or "(top level)"
        return ConfigError(f"{self.path}:{line}: {dotted}: {message}")


def _check_keys(table, allowed: dict, where: _Where, at: tuple) -> None:
    if not isinstance(table, dict):
        raise where.error(at, "must be a table")
    for key, value in table.items():
        if key not in allowed:
            import difflib

            close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; known keys: {', '.join(allowed)}"
            raise where.error(at + (key,), f"unknown key{hint}")
        expected = allowed[key]
        if not isinstance(value, expected) or (expected in (int, (int, float)) and isinstance(value, bool)):
            raise where.error(at + (key,), f"must be {_WORDS.get(expected, 'a number')}")


def _check_values(settings: dict, where: _Where, at: tuple) -> None:
    for key in ("world_size", "nodes", "gpus_per_node"):
        if key in settings and not 1 <= settings[key] <= 1 << 24:
            raise where.error(at + (key,), f"must be a whole number from 1 to {1 << 24:,}")
    for key, choices in CHOICES.items():
        if key in settings and settings[key] not in choices:
            raise where.error(at + (key,), f"{settings[key]!r} is not one of {', '.join(choices)}")


def _severity(table, where: _Where, at: tuple) -> dict:
    if not isinstance(table, dict):
        raise where.error(at, "must be a table of rule = severity")
    for rule, level in table.items():
        if level not in ("error", "warning", "info"):
            raise where.error(at + (rule,), f"{level!r} is not one of error, warning, info")
    return dict(table)


def _strings(values, where: _Where, at: tuple) -> list:
    for v in values:
        _string(v, where, at)
    return list(values)


def _string(value, where: _Where, at: tuple) -> str:
    if not isinstance(value, str):
        raise where.error(at, "must list strings")
    return value


# ------------------------------------------------------------------------- rule selection

def matches(rule, pattern: str) -> bool:
    """A selector matches a rule by ``ALL``, exact code, code prefix (``ML3``) or exact name."""
    return pattern == "ALL" or pattern == rule.name or rule.code.startswith(pattern)


def selected(rule, select: tuple, extend_select: tuple, ignore: tuple) -> bool:
    if any(matches(rule, p) for p in ignore):
        return False
    return any(matches(rule, p) for p in select) or any(matches(rule, p) for p in extend_select)


# Rules that were retired: selecting or ignoring them is not an error (configurations and
# suppressions written for older releases keep working); they match nothing.
REMOVED = {
    "ML110": "likely-misspelt-key: retired in 0.2; the generated schemas make every unknown key, in every "
             "section, an ML108 error, as both frameworks refuse it",
}
REMOVED_NAMES = {text.split(":", 1)[0]: code for code, text in REMOVED.items()}


def unknown_selectors(rules: list, selectors) -> list[str]:
    """Selectors that match no loaded rule (a typo would otherwise silently select nothing)."""
    return [p for p in selectors if p != "ALL" and p not in REMOVED and p not in REMOVED_NAMES
            and not any(matches(r, p) for r in rules)]
