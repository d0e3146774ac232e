"""``json.loads`` and meshlint's compact ``json.dumps`` through json's own C functions, without importing ``json``.

The ``json`` package compiles five patterns at import and imports ``re``: ~5.6 M instructions a first run
pays for the schemas it reads and the results cache entries it writes. Its work is done by the C module
``_json`` (the scanner and the encoder that ``json.loads`` and ``json.dumps`` call), given here the same
settings as json's defaults. Anything the short way does not take (not text, a byte-order mark, an error)
goes through ``json`` itself, whose result or exception stays the answer. tests/test_jsonfast.py compares
the two.
"""

from __future__ import annotations

import _json

_BLANKS = " \t\n\r"


class _Decoding:
    """What the C scanner reads from a ``json.JSONDecoder()`` with its default settings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = _json.make_scanner(_Decoding())
_FAILED = object()


def loads(text):
    """``json.loads(text)`` for ``str`` or ``bytes`` ``text``."""
    value = _FAILED
    try:
        value = _loads(text)
    except Exception:  # noqa: BLE001 - json words the error: it is asked again below
        pass
    if value is _FAILED:
        import json

        return json.loads(text)
    return value


def _loads(text):
    if isinstance(text, (bytes, bytearray)):
        # json.detect_encoding says UTF-8 for these first bytes (no byte-order mark, no NUL as UTF-16/32 has)
        if not text or text[0] in (0, 0xEF, 0xFE, 0xFF) or (len(text) > 1 and text[1] == 0):
            return _FAILED
        text = text.decode("utf-8", "surrogatepass")
    if not isinstance(text, str) or text.startswith("\ufeff"):
        return _FAILED
    start = len(text) - len(text.lstrip(_BLANKS))
    value, end = _scan(text, start)
    if text[end:].strip(_BLANKS):
        return _FAILED  # "Extra data": json raises it
    return value


def _default(o):
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def dumps_compact(value) -> str:
    """``json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)``: the encoder that call
    builds (circular references checked), the same errors (ValueError for NaN, TypeError for other types)."""
    if isinstance(value, str):
        return _json.encode_basestring(value)
    encode = _json.make_encoder({}, _default, _json.encode_basestring, None, ":", ",", False, False, False)
    return "".join(encode(value, 0))
