"""A launch whose config is a TOML file checked as it runs: KempnerForge's ``scripts/train.py CONFIG``
and torchtitan v0.2's ``--job.config_file CONFIG``. The TOML is found, the launch's overrides are laid
over it the way the framework lays them, findings about an overridden key point at the word in the script
(or on the command line) that sets it, and the world size comes from the launcher.

The merged config goes through the same pipeline as a TOML file (dialect, schema check, rules): both
frameworks apply CLI values over the TOML's config (KempnerForge with the function that applies the
TOML, loader.py:315-326; torchtitan v0.2 with tyro over the TOML's config as default, manager.py:50-60),
so a key they refuse or a value they convert is judged the same way. What this module adds: an
override whose value the script does not determine is unknown (listed, never the TOML's or the default
value), and KempnerForge's space form (``--distributed.tp 4``) is judged from the launch (ML317/ML318).
"""

from __future__ import annotations

import copy
import os

from meshlint.errors import InputError
from meshlint.inputs.launch_words import COMMAND_LINE
from meshlint.inputs.source import Source
from meshlint.keys import small_int


class LaunchedSource(Source):
    """A TOML config with a launch's overrides applied. ``path`` is the launch's display name;
    ``file`` the TOML; ``set_at`` maps an overridden dotted key to (file, line, col) of its word."""

    def __init__(self, display: str, toml: Source, data: dict, set_at: dict, marks: dict):
        super().__init__(display, toml.text, data, toml.name)
        self.file = toml.path
        self.set_at = set_at
        self.marks = marks                  # (line, col) -> file of a launch word a rule points at (#L<line>:<col>)
        self.toml_has = toml.has_key

    def _mark(self, key):
        """(line, col) of a ``#L<line>:<col>`` key that names a word of the launch, else None."""
        if not (isinstance(key, str) and key.startswith("#L")):
            return None
        line, _, col = key[2:].partition(":")
        at = (int(line), int(col)) if small_int(line) and small_int(col) else None
        return at if at in self.marks else None

    def _set_by(self, key):
        if not isinstance(key, str):
            key = ".".join(str(p) for p in key)
        parts = key.split(".")
        for cut in range(len(parts), 0, -1):
            hit = self.set_at.get(".".join(parts[:cut]))
            if hit is not None:
                return hit
        if not self.toml_has(key):
            # a section (or table) only overrides create (--distrbuted.dp_shard=3 makes 'distrbuted'): the
            # first word that sets a key below it, not the TOML, where it is nowhere
            below = [hit for path, hit in self.set_at.items() if path.startswith(key + ".")]
            if below:
                return min(below, key=lambda hit: (hit[1], hit[2]))
        return None

    def _pick(self, key):
        if isinstance(key, str) and "|" in key:
            options = [k.strip() for k in key.split("|") if k.strip()]
            return next((k for k in options if self.has_key(k)), options[0] if options else "")
        return key

    def locate(self, key):
        at = self._mark(key)
        if at is not None:
            return at
        hit = self._set_by(self._pick(key)) if key else None
        if hit is not None:
            return hit[1], hit[2]
        return super().locate(key)

    def has_key(self, key: str) -> bool:
        return self._set_by(key) is not None or self.toml_has(key)

    def file_of(self, key, line=None, col=None):
        at = self._mark(key)
        if at is not None:
            return self.marks[at]
        hit = self._set_by(self._pick(key)) if key else None
        return hit[0] if hit is not None else self.file


DIALECT = {"kempnerforge": "kempnerforge", "torchtitan-0.2": "torchtitan"}
NAMES = {"kempnerforge": "KempnerForge", "torchtitan-0.2": "torchtitan v0.2"}


def set_at_file(launch, script):
    return script if script else COMMAND_LINE


def apply_typed(launch, toml_data: dict, script: str | None) -> tuple:
    """torchtitan v0.2: tyro's typed values set over the TOML's (``apply_kf``'s result, no space form)."""
    data = copy.deepcopy(toml_data)
    set_at: dict = {}
    unread: list = []
    file = set_at_file(launch, script)
    for ov in launch.overrides:
        _, line, col = ov.position
        parts = ov.path.split(".")
        if not ov.known:
            _drop(data, parts)
            unread.append({"key": ov.path, "reason": f"{ov.text}: {ov.value.reason}", "line": line, "col": col})
        elif not _put(data, parts, ov.value):
            raise InputError("ML006", f"cannot apply {ov.text}: {'.'.join(parts[:-1])} holds a value, not a section",
                             line if script else 1, col)
        else:
            unread[:] = _still_unread(unread, ov.path)
        set_at[ov.path] = (file, line, col)
    return data, set_at, unread, []


def apply_kf(launch, toml_data: dict, script: str | None) -> tuple:
    """(merged data, {dotted key: (file, line, col)}, [unknown overrides], [space-form verdicts]).

    The loader builds one dict from every override (a later key wins) and lays it over the config
    built from the TOML, section by section and key by key; a space-form override gives the string
    "true" (a bool key reads it as true). A space form KempnerForge refuses is left out of the data:
    the run never starts, and ML317 says why."""
    from meshlint.frameworks.kempnerforge.v5666d0d import _judge_space_override

    data = copy.deepcopy(toml_data)
    set_at: dict = {}
    unread: list = []
    space: list = []
    for ov in launch.overrides:
        file = set_at_file(launch, script)
        _, line, col = ov.position
        if not ov.path:
            continue
        parts = ov.path.split(".")
        if not ov.known:
            _drop(data, parts)
            set_at[ov.path] = (file, line, col)
            unread.append({"key": ov.path, "reason": f"{ov.text}: {ov.value.reason}", "line": line, "col": col,
                           "file": file})
            continue
        value = ov.value
        if ov.kind in ("space", "flag"):
            item = {"line": line, "col": col, "key": ov.path, "value": ov.dropped or "true", "command": True}
            verdict = _judge_space_override(dict(item), toml_data) if ov.kind == "space" else None
            if verdict is not None:
                space.append(verdict)
                if verdict["refused"]:
                    continue
            value = True if _is_bool(ov.path) else "true"
        elif isinstance(value, str) and value.lower() in _BOOL_WORDS and _is_bool(ov.path):
            # a command line has no TOML booleans: KempnerForge's documented --train.compile_model=true is
            # the string "true", which _coerce_value reads as the bool (loader.py:104-106); another word
            # stays a string, and the schema check says KempnerForge reads it as false
            value = value.lower() in ("true", "1", "yes")
        if not _put(data, parts, value):
            raise InputError("ML006", f"cannot apply {ov.text}: {'.'.join(parts[:-1])} holds a value, not a section "
                                      "(KempnerForge's loader fails on it)", line if script else 1, col)
        for key in [k for k in set_at if k.startswith(ov.path + ".")]:
            del set_at[key]
        unread[:] = _still_unread(unread, ov.path)
        set_at[ov.path] = (file, line, col)
    return data, set_at, unread, space


_BOOL_WORDS = ("true", "false", "1", "0", "yes", "no")


def _still_unread(unread: list, path: str) -> list:
    """The unknown overrides a later known value of ``path`` does not replace."""
    return [u for u in unread if u["key"] != path and not u["key"].startswith(path + ".")]


def _is_bool(path: str) -> bool:
    from meshlint.frameworks import schema_data

    try:
        entry = schema_data.load("kempnerforge", "5666d0d").key(path)
    except schema_data.SchemaError:
        return False
    return bool(entry) and (entry.get("type") or {}).get("kind") == "bool"


def _put(data: dict, parts: list, value) -> bool:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            return False
        node = child
    node[parts[-1]] = value
    return True


def _drop(data: dict, parts: list) -> None:
    node = data
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def _unreadable(spec, unread: list, dialect: str) -> None:
    """Facts an unknown override sets are unknown (None), never the TOML's or the default value; the
    degrees among them stop the resolution (as for a registry value read nowhere)."""
    degree_of = {path: name for name, path in spec.degree_keys.items()}
    unread_degrees = []
    for item in unread:
        key = item["key"]
        for fact in list(spec.values):
            if fact == key or fact.startswith(key + "."):
                spec.values[fact] = None
        for path, name in degree_of.items():
            if path == key or path.startswith(key + "."):
                spec.degrees[name] = None
                unread_degrees.append(name)
    spec.unreadable = [{k: v for k, v in item.items() if k != "file"} for item in unread]
    spec.extra["unread_degrees"] = unread_degrees


def resolve_config(path: str, script: str | None, cwd: str | None = None) -> tuple:
    """(absolute path or None, [paths tried]) of a launch's config path. Absolute: as is. Relative, in a
    script: the script's directory, then each directory above it up to its git root (scripts are run
    from the repository's root, e.g. KempnerForge's ``bash benchmarks/mfu_scaling/mfu_bench.sh``), then
    the current directory; on meshlint's command line: the current directory only."""
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        return (path if os.path.isfile(path) else None), [path]
    tried: list = []
    cwd = cwd or os.getcwd()
    if script:
        d = os.path.dirname(os.path.abspath(script))
        while True:
            tried.append(os.path.join(d, path))
            if os.path.exists(os.path.join(d, ".git")) or os.path.dirname(d) == d:
                break
            d = os.path.dirname(d)
    tried.append(os.path.join(cwd, path))
    tried = list(dict.fromkeys(os.path.normpath(t) for t in tried))
    found = next((t for t in tried if os.path.isfile(t)), None)
    return found, tried
