"""Reading a YAML config (Accelerate's ``accelerate config`` files): bytes -> node tree -> plain data, with the
line and column of every key, under the same input limits as TOML and without building any Python object
but the plain scalars ``yaml.safe_load`` builds (what Accelerate itself reads them with).

PyYAML is imported here only, so the static path pays for it only when a YAML file is read.
"""

from __future__ import annotations

import os
import re
from functools import cached_property

from meshlint.errors import InputError
from meshlint.limits import MAX_FILE_BYTES, MAX_KEYS, MAX_NESTING
from meshlint.inputs.source import check_text_limits, decode, read_bytes, split_key

YAML_SUFFIXES = (".yaml", ".yml")
_HELP = "meshlint's input limits are listed in the README (meshlint/limits.py)"
_COMMENT = re.compile(r"(?:^|\s)#(.*)$")


class YamlSource:
    """One parsed YAML file: ``data`` as ``yaml.safe_load`` gives it, and where each key is written."""

    def __init__(self, path: str, text: str, data, keys: dict, name: str = "", spans: dict | None = None):
        self.path = path
        self.text = text
        self.data = data
        self.name = name or os.path.basename(path)
        self._keys = keys  # key path tuple -> (line, col) of the key (of the value for list items)
        self.spans = spans or {}  # key path tuple -> (start, end) character offsets of a scalar value (meshlint fix)

    @cached_property
    def comments(self) -> list:
        """``[(line, col, text after '#')]``, the shape TOML comments have (directives, topology hints)."""
        out = []
        for number, line in enumerate(self.text.split("\n"), 1):
            if "#" not in line:
                continue
            match = _COMMENT.search(_outside_quotes(line))
            if match:
                out.append((number, match.start(1), line[match.start(1):].rstrip("\r")))
        return out

    def locate(self, key) -> tuple[int, int]:
        """Line and column of a dotted key path; ``a|b`` takes the first written; unknown keys fall back to
        the nearest written parent, then line 1."""
        if not key:
            return (1, 1)
        if isinstance(key, str) and key.startswith("#L") and key[2:].isdigit():
            return (int(key[2:]), 1)
        if isinstance(key, str) and "|" in key:
            options = [k.strip() for k in key.split("|") if k.strip()]
            key = next((k for k in options if self.has_key(k)), options[0] if options else "")
        path = split_key(key) if isinstance(key, str) else tuple(key)
        while path:
            if path in self._keys:
                return self._keys[path]
            path = path[:-1]
        return (1, 1)

    def has_key(self, key: str) -> bool:
        return split_key(key) in self._keys


def _outside_quotes(line: str) -> str:
    """The line with quoted text blanked, so a '#' inside a string is not a comment."""
    return re.sub(r"\"(?:\\.|[^\"\\])*\"|'[^']*'", lambda m: " " * len(m.group()), line)


def read_yaml_source(path: str, raw: bytes | None = None, name: str | None = None) -> YamlSource:
    raw = read_bytes(path) if raw is None else raw
    text = decode(raw.removeprefix(b"\xef\xbb\xbf"))  # YAML allows the byte-order mark that TOML forbids
    data, keys, spans = parse_yaml(text, spans=True)
    return YamlSource(path, text, data, keys, name or os.path.basename(path), spans)


def parse_yaml(text: str, spans: bool = False) -> tuple:
    """(data, key positions[, value spans]) of one YAML document; InputError (ML007 limits, ML009 invalid)."""
    if len(text) > MAX_FILE_BYTES:
        raise InputError("ML007", f"file is over the limit of {MAX_FILE_BYTES:,} bytes", help=_HELP)
    check_text_limits(text)  # line length, flow nesting ([ {), long numbers: before any parsing
    _check_indent_depth(text)
    import yaml  # noqa: PLC0415 - only when a YAML file is read

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)  # nodes only: no constructor runs here
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        raise InputError("ML009", f"invalid YAML: {what}", line, col,
                         help="accelerate reads this file with yaml.safe_load, which refuses it too") from None
    except yaml.YAMLError as exc:
        raise InputError("ML009", f"invalid YAML: {str(exc)[:200]}") from None
    except RecursionError:
        raise InputError("ML007", f"nested more than {MAX_NESTING} deep", help=_HELP) from None
    keys: dict = {}
    where: dict = {}
    data = {} if node is None else _plain(node, (), keys, 1, [0], where)
    return (data, keys, where) if spans else (data, keys)


def _check_indent_depth(text: str) -> None:
    """Block nesting (indentation) deeper than MAX_NESTING, refused before the parser recurses into it."""
    stack = [0]
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped) + _dashes(stripped)
        while stack and indent < stack[-1]:
            stack.pop()
        if not stack or indent > stack[-1]:
            stack.append(indent)
        if len(stack) > MAX_NESTING:
            raise InputError("ML007", f"mappings or lists nested more than {MAX_NESTING} deep", number,
                             len(line) - len(stripped) + 1, help=_HELP)


def _dashes(text: str) -> int:
    """``- - - x``: each leading list dash opens one more level on the same line."""
    count = 0
    while text.startswith("- ") or text == "-":
        count += 2
        text = text[2:].lstrip(" ")
    return count


def _plain(node, path: tuple, keys: dict, depth: int, count: list, spans: dict):
    """The node as plain data (dict, list, str, int, float, bool, None), positions recorded; aliases are
    followed but counted, so a billion-laughs file stops at the key limit."""
    import yaml

    if depth > MAX_NESTING:
        raise InputError("ML007", f"nested more than {MAX_NESTING} deep", node.start_mark.line + 1,
                         node.start_mark.column + 1, help=_HELP)
    count[0] += 1
    if count[0] > MAX_KEYS:
        raise InputError("ML007", f"more than {MAX_KEYS:,} keys and list items (aliases count each time they "
                                  f"are used); the limit is {MAX_KEYS:,}", help=_HELP)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_COLLECTIONS:
        raise _invalid(node, _tag_refused(node.tag))
    if isinstance(node, yaml.MappingNode):
        out: dict = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _invalid(key_node, "a mapping key that is not a scalar")
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _invalid(key_node, "a merge key (<<), which meshlint does not follow")
            key = _scalar(key_node)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise _invalid(key_node, "a mapping key that is not a string or number")
            sub = path + (str(key),)
            keys.setdefault(sub, (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
            if isinstance(value_node, yaml.ScalarNode):
                spans[sub] = (value_node.start_mark.index, value_node.end_mark.index)
            out[key] = _plain(value_node, sub, keys, depth + 1, count, spans)  # a later duplicate wins (safe_load)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            sub = path + (index,)
            keys.setdefault(sub, (item.start_mark.line + 1, item.start_mark.column + 1))
            items.append(_plain(item, sub, keys, depth + 1, count, spans))
        return items
    return _scalar(node)


_PLAIN_COLLECTIONS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_CONSTRUCTOR: list = []


def _scalar(node):
    """A scalar exactly as yaml.safe_load builds it (ints in every YAML 1.1 form, bools, nulls, floats);
    a tag outside the safe set is refused, as safe_load refuses it."""
    import yaml

    if not _CONSTRUCTOR:
        _CONSTRUCTOR.append(yaml.SafeLoader(""))
    constructor = _CONSTRUCTOR[0]
    if node.tag not in constructor.yaml_constructors or node.tag in (
            "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs",
            "tag:yaml.org,2002:set"):
        raise _invalid(node, _tag_refused(node.tag))
    try:
        return constructor.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise _invalid(node, str(getattr(exc, "problem", None) or exc)[:200]) from None
    except (ValueError, OverflowError) as exc:
        raise _invalid(node, str(exc)[:200]) from None


def _tag_refused(tag: str) -> str:
    if tag.startswith("tag:yaml.org,2002:python/") or not tag.startswith("tag:yaml.org,2002:"):
        return f"the tag {tag!r}, which yaml.safe_load refuses (it would build a Python object)"
    return f"the tag {tag!r}: an accelerate config is plain mappings, lists and scalars"


def _invalid(node, what: str) -> InputError:
    return InputError("ML009", f"invalid YAML: {what}", node.start_mark.line + 1, node.start_mark.column + 1,
                      help="accelerate reads this file with yaml.safe_load")
