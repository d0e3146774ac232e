"""meshlint/jsonfast.py gives what json gives: the same values, the same text, the same exceptions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshlint import jsonfast

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return type(exc), str(exc)


def _same(a, b) -> bool:
    return json.dumps(a, allow_nan=True) == json.dumps(b, allow_nan=True) and type(a) is type(b)


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(_VALUES)
def test_dumps_compact_is_json_dumps_with_those_settings(value):
    ours = _outcome(jsonfast.dumps_compact, value)
    theirs = _outcome(lambda v: json.dumps(v, separators=(",", ":"), allow_nan=False, ensure_ascii=False), value)
    assert ours == theirs


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(_VALUES, st.sampled_from(["", " ", "\n", "x", "\ufeff", "]", "\t\r"]), st.sampled_from(["", " ", "\n", "x"]),
       st.booleans(), st.integers(0, 40))
def test_loads_is_json_loads(value, before, after, as_bytes, cut):
    text = before + json.dumps(value, allow_nan=True, ensure_ascii=cut % 2 == 0) + after
    if cut > 30:
        text = text[:len(text) * (cut - 30) // 10]  # cut short
    data = text.encode("utf-8", "surrogatepass") if as_bytes else text
    ours, theirs = _outcome(jsonfast.loads, data), _outcome(json.loads, data)
    assert ours[0] == theirs[0] and (ours[0] is not str or ours == theirs)
    if ours[0] == "ok":
        assert _same(ours[1], theirs[1])
    else:
        assert ours == theirs


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00", b'{"a": 1}', b"[1, 2]", "NaN", "-Infinity",
                                  '{"a": NaN}', "[1,]", '{"a" 1}', "1 2", b"\x00\x00\x00{", bytearray(b"[true]"), 5])
def test_loads_edge_cases(data):
    ours, theirs = _outcome(jsonfast.loads, data), _outcome(json.loads, data)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        assert _same(ours[1], theirs[1])
    else:
        assert ours == theirs


def test_dumps_compact_refuses_what_json_refuses():
    loop: list = []
    loop.append(loop)
    for value in (float("nan"), {1: object()}, loop, {(1, 2): 3}, "é\u2028\"", {"k": [1.5, -0.0, 10**30]}):
        ours = _outcome(jsonfast.dumps_compact, value)
        theirs = _outcome(lambda v: json.dumps(v, separators=(",", ":"), allow_nan=False, ensure_ascii=False), value)
        assert ours == theirs
