"""schema_data._seed reads the usual ``self.x not in ...`` conditions without the parser, exactly as with it."""

from __future__ import annotations

import _ast
import json

import pytest
from conftest import ROOT

from meshlint.frameworks import schema_data


def _parsed(condition: str):
    """What _seed's parse makes of ``condition``: (attr, the Name on the right or None), or None."""
    try:
        node = compile(condition, "<unknown>", "eval", _ast.PyCF_ONLY_AST).body
    except (SyntaxError, ValueError):
        return None
    if not (isinstance(node, _ast.Compare) and isinstance(node.left, _ast.Attribute)):
        return None
    right = node.comparators[0]
    return node.left.attr, right.id if isinstance(right, _ast.Name) else None


def _conditions(value):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "condition" and isinstance(v, str):
                yield v
            else:
                yield from _conditions(v)
    elif isinstance(value, list):
        for v in value:
            yield from _conditions(v)


GENERATED = sorted({c for p in (ROOT / "meshlint" / "data" / "schema").glob("*.json")
                    for c in _conditions(json.loads(p.read_text()))})
TRICKY = ["self.a not in b", "self.a not in b.c()", "self.a not in ('x', 'y')", "self.a not in ('x')",
          "self.a not in None", "self.class not in b", "self.a not in b or c", "self.a not in b not in c",
          "self.a not in ('x', 'y',)", "self.a not in ('x' 'y')", "self.a not in ('a, b', 'c')", " self.a not in b",
          "self.a not in b ", "self.a.b not in c", "self.é not in b", "self.a not in b()", "self.a not in b.c(d)",
          "self.a not in ('\\n')", "self.a not in ('x\x00')", "self.a  not in b", "self.a in b", "x.a not in b",
          "self.a not in True", "self.a not in ('x', \"y\")", "self.a not in registry.list_x()",
          "self.a not in {'x', 'y'}", "self.a not in {'x': 1}", "self.a not in {'x', 'y']", "self.a.lower() not in b"]


@pytest.mark.parametrize("condition", GENERATED + TRICKY)
def test_the_shapes_read_without_the_parser_are_the_parser_s(condition):
    shape = schema_data._seed_shape(condition)
    assert shape is None or shape == _parsed(condition), condition


def test_the_generated_not_in_conditions_take_the_short_way():
    not_in = [c for c in GENERATED if " not in " in c and c.partition(" not in ")[0][5:].isidentifier()]
    assert not_in and all(schema_data._seed_shape(c) is not None for c in not_in), \
        [c for c in not_in if schema_data._seed_shape(c) is None]


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _for_headers():
    for path in sorted((ROOT / "meshlint" / "data" / "schema").glob("*.json")):
        data = json.loads(path.read_text())
        for text in sorted({s for s in _strings(data) if s.startswith("for ")}):
            yield path.stem, text


def _shape_of(target):
    kind = type(target).__name__
    return target.id if kind == "Name" else tuple(_shape_of(t) for t in target.elts) if kind in ("Tuple", "List") \
        else kind


@pytest.mark.parametrize("schema,header", list(_for_headers()))
def test_for_headers_read_without_the_parser_are_the_parser_s(schema, header):
    framework, _, version = schema.partition("-")
    schema_data.load(framework, version).data  # its prewritten texts, as a run has them
    quick = schema_data._for_shape(header)
    if quick is None:
        return
    loop = schema_data._parsed(header)
    assert loop is not None
    assert _shape_of(quick[0]) == _shape_of(loop.target)
    assert quick[1] == schema_data._iter_text(header, loop)


def test_kempnerforge_s_for_headers_take_the_short_way():
    headers = [h for s, h in _for_headers() if s.startswith("kempnerforge")]
    schema_data.load("kempnerforge", "5666d0d").data
    assert headers and all(schema_data._for_shape(h) is not None for h in headers)
