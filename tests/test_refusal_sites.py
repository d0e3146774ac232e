"""The raise/assert sites the refusal inventories list (meshlint/generate/refusal_sites.py): each condition shown as
Python reads the code."""

from __future__ import annotations

import ast

import pytest

from meshlint.generate.refusal_sites import _Walker


def _conditions(source: str) -> list:
    sites: list = []
    _Walker("m.py", sites).visit(ast.parse(source))
    return [s.condition for s in sites]


@pytest.mark.parametrize("source, shown", [
    ("if a or b:\n    assert not c, 'm'\n", "(a or b) and not (not c)"),  # Megatron's transformer_config.py:1674
    ("if a or b:\n    raise ValueError('m')\n", "a or b"),  # alone: no parentheses to add
    ("if a and b:\n    if c or d:\n        raise ValueError('m')\n", "a and b and (c or d)"),
    ("if a:\n    if (x := f()) :\n        raise ValueError('m')\n", "a and (x := f())"),
    ("if a:\n    if x if c else y:\n        raise ValueError('m')\n", "a and (x if c else y)"),
    ("if a or b:\n    pass\nelse:\n    if c:\n        raise ValueError('m')\n", "not (a or b) and c"),
    ("for i in xs:\n    if i or j:\n        raise ValueError('m')\n", "for i in xs and (i or j)"),
    ("raise ValueError('m')\n", "always (when reached)"),
])
def test_a_condition_that_binds_looser_than_and_is_parenthesised(source, shown):
    assert _conditions(source) == [shown]
    joined = shown.removeprefix("for i in xs and ")
    if joined != "always (when reached)":
        ast.parse(joined, mode="eval")  # still Python
