"""A cache of parsed rule files and of the built-in model table, stored as JSON data that cannot run code.

Parsing ~60 rule files and their expressions costs ~20 ms per run, and
validating a user pack with jsonschema ~150 ms: both are paid once per change
of the rule files instead of on every pre-commit run. The cache lives in
``$MESHLINT_CACHE_DIR``, ``$XDG_CACHE_HOME/meshlint`` or ``~/.cache/meshlint``;
a read-only or missing home just means no cache; ``MESHLINT_NO_CACHE=1`` turns
it off.

What it trusts, and why that is safe:

* Nothing in it is ever executed: entries are JSON (no pickle, no marshal),
  and an expression is stored as its syntax tree, rebuilt node by node from
  the same whitelist the parser uses (known node types, operators from fixed
  sets, functions from ``expr.FUNCTIONS``, plain JSON constants). Each tree is
  kept as a JSON string inside the entry and parsed (``json.loads``, then that
  whitelist) only when its rule is first evaluated: most trees never are in a
  run, and a string costs the entry's parse far less than the lists it holds.
  A tampered entry can at worst describe a different rule, never run code.
* It is used only when the directory and the entry belong to the current user
  and neither is writable by group or others, so another user of a shared
  cache directory cannot plant or swap entries (they are ignored, and nothing
  is written there).
* An entry is used only for the exact key it was stored under: meshlint's
  version, this cache format, the modules that build rules, and every rule
  file's path, size and modification time. Anything missing, unreadable,
  foreign, malformed or stale is ignored and rebuilt from the rule files.
"""

from __future__ import annotations

import os
import stat
import zlib

from meshlint import __version__

FORMAT = 3                 # of the JSON entries; 1 was pickle (never read: old *.pickle files are deleted);
                           # 2 held trees as JSON lists (ignored now: rebuilt in format 3)
MAX_ENTRY_BYTES = 8 << 20  # a bigger entry is not one meshlint wrote
KEEP = 8                   # entries kept (each rule edit makes a new one)


def cache_dir() -> str | None:
    if os.environ.get("MESHLINT_NO_CACHE"):
        return None
    explicit = os.environ.get("MESHLINT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "meshlint")


def key_for(dirs: list) -> str | None:
    """Everything the parsed rules depend on, as one string (stored in the entry and compared)."""
    parts = [f"meshlint {__version__} rules v{FORMAT}"]
    try:
        # the modules that parse and build rules: a changed module means a stale cache
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the meshlint package
        from meshlint.engine.expr import MODULES

        for module in [f"engine/expr/{name}" for name in MODULES] + ["engine/rules.py", "engine/rule_cache.py",
                                                                      "limits.py"]:
            parts.append(f"{module} {os.stat(os.path.join(here, module)).st_mtime_ns}")
        for directory, origin in dirs:
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                if entry.name.endswith(".toml") and entry.name != "models.toml" and entry.is_file():
                    st = entry.stat()
                    parts.append(f"{origin} {os.path.abspath(entry.path)} {st.st_size} {st.st_mtime_ns}")
    except OSError:
        return None
    return "\n".join(parts)


def key_for_files(label: str, paths: list) -> str | None:
    """The key of data parsed from ``paths`` (the built-in model table): their sizes and mtimes."""
    parts = [f"meshlint {__version__} {label} v{FORMAT}"]
    try:
        for path in paths:
            st = os.stat(path)
            parts.append(f"{os.path.abspath(path)} {st.st_size} {st.st_mtime_ns}")
    except OSError:
        return None
    return "\n".join(parts)


def _file_for(directory: str, key: str) -> str:
    # a cheap checksum names the file; the full key inside it is what is compared
    return os.path.join(directory, f"rules-{zlib.crc32(key.encode()):08x}.json")


# ------------------------------------------------------------------------------------- trust

def _owned(st: os.stat_result) -> bool:
    """Owned by this user (where the platform has users)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid is None or st.st_uid == geteuid()


def _owned_private(st: os.stat_result) -> bool:
    """Owned by this user and not writable by group or others."""
    return _owned(st) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _trusted_dir(directory: str) -> bool:
    try:
        st = os.stat(directory)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if _owned_private(st):
        return True
    if not os.environ.get("MESHLINT_CACHE_DIR") and _owned(st):
        # meshlint's own default directory, made group-writable by a umask: make it private again
        # (a directory given in MESHLINT_CACHE_DIR is the user's to set: there it is only ignored)
        try:
            os.chmod(directory, 0o700)
            return True
        except OSError:
            return False
    return False


# the same trust rules for the results cache (meshlint/cli/results_cache.py; its entries: read_private)
trusted_dir = _trusted_dir


# ------------------------------------------------------------------------------------- load / store

_O_PRIVATE = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
              | getattr(os, "O_NOCTTY", 0))


def read_private(path: str, limit: int) -> bytes | None:
    """The bytes of a cache entry, or None unless it is a regular file (not a link, FIFO or device) of at
    most ``limit`` bytes that this user owns and no one else can write: the trust rule of both caches."""
    try:
        fd = os.open(path, _O_PRIVATE)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _owned_private(st) or st.st_size > limit:
            return None
        raw = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return raw if len(raw) <= limit else None


def load(key: str | None):
    """The value stored under ``key`` (a list of Rule, or a model table), or None."""
    directory = cache_dir()
    if not key or not directory or not _trusted_dir(directory):
        return None
    raw = read_private(_file_for(directory, key), MAX_ENTRY_BYTES)
    if raw is None:
        return None
    try:
        import json

        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
            return None
        return _decode_value(doc.get("kind"), doc.get("value"))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, _Bad):
        return None  # malformed, truncated or foreign: rebuilt from the rule files


def store(key: str | None, value) -> None:
    directory = cache_dir()
    if not key or not directory:
        return
    try:
        kind, encoded = _encode_value(value)
    except (_Bad, ValueError):  # ValueError: expr.treecode's BadTree
        return  # something JSON cannot hold (a date in a rule's params): just not cached
    try:
        import json
        import tempfile

        text = json.dumps({"format": FORMAT, "meshlint": __version__, "key": key, "kind": kind, "value": encoded},
                          separators=(",", ":"), allow_nan=False)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if not _trusted_dir(directory):
            return  # a directory others can write: never used, so never written either
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rules-", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, _file_for(directory, key))
        _prune(directory, keep=KEEP)
    except (OSError, ValueError, RecursionError):
        pass  # a read-only home is fine: the cache is only an optimisation


def _prune(directory: str, keep: int) -> None:
    """Drop all but the newest ``keep`` entries, and every pickle an older meshlint left."""
    entries = []
    for e in os.scandir(directory):
        if e.name.startswith("rules-") and e.name.endswith(".pickle"):
            _unlink(e.path)
        elif e.name.startswith("rules-") and e.name.endswith(".json"):
            entries.append(e)
    entries.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
    for entry in entries[keep:]:
        _unlink(entry.path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ------------------------------------------------------------------------------------- encoding

class _Bad(Exception):
    """A value that cannot be stored, or an entry that is not one meshlint wrote."""


def _encode_value(value) -> tuple[str, object]:
    from meshlint.engine.rules import Rule

    if isinstance(value, list) and all(isinstance(r, Rule) for r in value):
        return "rules", [_encode_rule(r) for r in value]
    if isinstance(value, dict) and all(isinstance(k, tuple) and len(k) == 2 for k in value):
        return "models", [[name, flavor, _plain(facts)] for (name, flavor), facts in value.items()]
    raise _Bad("not a cacheable value")


def _decode_value(kind, value):
    if kind == "rules" and isinstance(value, list):
        _expr_module()
        return [_decode_rule(r) for r in value]
    if kind == "models" and isinstance(value, list):
        from meshlint.frameworks.models import FIELDS

        table = {}
        for item in value:
            name, flavor, facts = _want(item, list, 3)
            if not isinstance(name, str) or not isinstance(flavor, str) or not isinstance(facts, dict):
                raise _Bad("model entry")
            for k, v in facts.items():  # the types models.parse_table accepts, nothing else
                want = FIELDS.get(k)
                if want is None or not isinstance(v, want) or (want is int and isinstance(v, bool)):
                    raise _Bad("model facts")
            table[(name, flavor)] = facts
        return table
    raise _Bad("unknown kind")


_E = None


def _expr_module():
    global _E
    if _E is None:
        from meshlint.engine import expr

        _E = expr
    return _E


def _encode_rule(rule) -> dict:
    """Each field as [kind, payload]: kinds say how to rebuild it, so a new Rule field needs no change here."""
    from meshlint.engine import expr

    out = {}
    for field, value in zip(rule._fields, rule):
        if isinstance(value, expr.Expr):
            out[field] = ["expr", _encode_expr(value)]
        elif isinstance(value, expr.Template):
            out[field] = ["template", value.source]
        elif isinstance(value, tuple):
            out[field] = ["tuple", _plain(list(value))]
        elif field == "lets":
            out[field] = ["lets", {k: _encode_expr(e) for k, e in value.items()}]
        elif field == "help":
            out[field] = ["help", [[None if c is None else _encode_expr(c), t.source]
                                   for c, t in value]]
        else:
            out[field] = ["data", _plain(value)]
    return out


# What each field of a Rule may be stored as ("none": the data null). A field added to Rule later
# is accepted in whatever kind it was stored as (the encoder picks the kind from the value).
_FIELD_KINDS = {
    "code": ("str",), "name": ("str",), "severity": ("str",), "summary": ("str",), "path": ("str",),
    "origin": ("str",), "check": ("expr",), "message": ("template",), "dialects": ("tuple", "none"),
    "frameworks": ("tuple", "none"), "params": ("dict",), "doc": ("dict",), "lets": ("lets",),
    "foreach": ("expr", "none"), "when": ("expr", "none"), "key": ("template", "none"), "help": ("help",),
    "fallback": ("bool",), "skip_note": ("bool",),
}
_DATA_KIND = {str: "str", dict: "dict", bool: "bool", type(None): "none"}


def _decode_rule(data) -> object:
    e, rule_type = _E, _rule_type()
    fields = rule_type._fields
    if data.__class__ is not dict or len(data) != len(fields):
        raise _Bad("rule fields")
    values = []
    for field in fields:
        kind, payload = data[field]  # a wrong shape raises ValueError/TypeError/KeyError: ignored entry
        allowed = _FIELD_KINDS.get(field)
        if kind == "data":
            if allowed is not None and _DATA_KIND.get(payload.__class__) not in allowed:
                raise _Bad(field)
            values.append(payload)
            continue
        if allowed is not None and kind not in allowed:
            raise _Bad(field)
        if kind == "expr":
            values.append(_decode_expr(payload))
        elif kind == "template":
            values.append(e.Template(_want(payload, str)))
        elif kind == "tuple":
            values.append(tuple(_want(payload, list)))
        elif kind == "lets":
            values.append({_want(k, str): _decode_expr(v) for k, v in _want(payload, dict).items()})
        elif kind == "help":
            values.append([(None if c is None else _decode_expr(c), e.Template(_want(t, str)))
                           for c, t in _want(payload, list)])
        else:
            raise _Bad("field kind")
    return rule_type(*values)


_RULE = None


def _rule_type():
    global _RULE
    if _RULE is None:
        from meshlint.engine.rules import Rule

        _RULE = Rule
    return _RULE


def _plain(value):
    """``value`` if it is plain JSON data (what TOML gives, minus dates and non-finite floats)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Bad("non-finite float")
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    raise _Bad(f"cannot store a {type(value).__name__}")


def _is_scalar(v) -> bool:  # a constant of an expression
    return v is None or isinstance(v, (str, bool, int, float))


def _want(value, kind: type, length: int | None = None):
    if not isinstance(value, kind) or (length is not None and len(value) != length):
        raise _Bad("shape")
    return value


def _encode_expr(value) -> list:
    # the tree as a JSON string: the entry's parse skips over it; decode_tree parses it when first used
    import json

    from meshlint.engine.expr.treecode import encode_tree

    return [value.source, json.dumps(encode_tree(value.root), separators=(",", ":"), allow_nan=False)]


def _decode_expr(payload):
    """An Expr whose tree is rebuilt on first use (``decode_tree``): most are never used in a run."""
    e = _E
    source, tree = payload  # a wrong shape raises ValueError/TypeError: the entry is ignored
    if source.__class__ is not str or len(source) > e.MAX_SOURCE or tree.__class__ is not str:
        raise _Bad("expression")
    return e.Expr(source, None, 0, tree)


