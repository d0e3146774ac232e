"""A cache of parsed rule files (the rules' codec of meshlint/cachestore.py), stored as JSON data that cannot run code.

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

from meshlint import __version__, cachestore
# the store itself, for the rule loader, the prebuilt rules' generator and the tests
from meshlint.cachestore import FORMAT, _file_for, cache_dir, key_for_files, load, read_private, store, trusted_dir  # noqa: F401
from meshlint.cachestore import Bad as _Bad
from meshlint.cachestore import plain as _plain
from meshlint.cachestore import want as _want


def key_for(dirs: list) -> str | None:
    """Everything the parsed rules depend on, as one string (stored in the entry and compared)."""
    parts = [f"meshlint {__version__} rules v{FORMAT}"]
    try:
        # the modules that parse and build rules: a changed module means a stale cache
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the meshlint package
        from meshlint.engine.expr import MODULES

        for module in [f"engine/expr/{name}" for name in MODULES] + ["engine/rules.py", "engine/rule_cache.py",
                                                                      "cachestore.py", "limits.py"]:
            parts.append(f"{module} {os.stat(os.path.join(here, module)).st_mtime_ns}")
        for directory, origin in dirs:
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                if entry.name.endswith(".toml") and entry.name != "models.toml" and entry.is_file():
                    st = entry.stat()
                    parts.append(f"{origin} {os.path.abspath(entry.path)} {st.st_size} {st.st_mtime_ns}")
    except OSError:
        return None
    return "\n".join(parts)


# ------------------------------------------------------------------------------------- encoding

def _is_rules(value) -> bool:
    from meshlint.engine.rules import Rule

    return isinstance(value, list) and all(isinstance(r, Rule) for r in value)


def _encode_rules(value) -> list:
    return [_encode_rule(r) for r in value]


def _decode_rules(value) -> list:
    if not isinstance(value, list):
        raise _Bad("unknown kind")
    _expr_module()
    return [_decode_rule(r) for r in value]


cachestore.register("rules", _is_rules, _encode_rules, _decode_rules)
_encode_value, _decode_value = cachestore.encode, cachestore.decode  # (kind, data) of any registered value


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


def _is_scalar(v) -> bool:  # a constant of an expression
    return v is None or isinstance(v, (str, bool, int, float))


def _encode_expr(value) -> list:
    # the tree as a JSON string: the entry's parse skips over it; expr.treecode.decode_tree parses it when first used
    import json

    from meshlint.engine.expr.treecode import BadTree, encode_tree

    try:
        return [value.source, json.dumps(encode_tree(value.root), separators=(",", ":"), allow_nan=False)]
    except BadTree as exc:
        raise _Bad(str(exc)) from None  # not storable: the rules are simply not cached


def _decode_expr(payload):
    """An Expr whose tree is rebuilt on first use (``decode_tree``): most are never used in a run."""
    e = _E
    source, tree = payload  # a wrong shape raises ValueError/TypeError: the entry is ignored
    if source.__class__ is not str or len(source) > e.MAX_SOURCE or tree.__class__ is not str:
        raise _Bad("expression")
    return e.Expr(source, None, 0, tree)


_E = None


def _expr_module():
    global _E
    if _E is None:
        from meshlint.engine import expr

        _E = expr
    return _E
