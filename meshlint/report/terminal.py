"""Text for a terminal: control characters from configs and rule packs are shown, never obeyed.

A config key can hold any character (``"\\u001b]0;owned\\u0007" = 1``), and so can
a rule pack's message or a file name. Written raw, ESC sequences retitle or
clear the terminal, a carriage return overwrites the line before it, a newline
forges a finding line, and bidirectional overrides make text read differently
from what it is. Text output escapes them as ``\\x1b`` / ``\\u202e``; JSON, SARIF
and GitHub output stay exact (they have their own escaping).
"""

from __future__ import annotations

import sys

from meshlint import fastre

# C0 controls but tab (and newline where layout needs it), DEL, C1 controls, the Arabic letter
# mark, zero-width space, LRM/RLM, line/paragraph separators, bidi embeddings, overrides and
# isolates, and the BOM. (Zero-width joiners stay: scripts and emoji need them.)
_UNSAFE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]"
_UNSAFE_OR_NEWLINE = "[\n\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]"
_PATTERNS: dict = {}  # compiled on first need: most text is printable and never needs them


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str, newlines: bool = False) -> str:
    """``text`` with every unsafe character written as an escape; newlines too unless ``newlines``."""
    if text.isprintable():  # the usual case: every character unsafe here is Cc, Cf, Zl or Zp, none printable
        return text
    pattern = _PATTERNS.get(newlines)
    if pattern is None:
        pattern = _PATTERNS[newlines] = fastre.compile(_UNSAFE) if newlines else fastre.compile(_UNSAFE_OR_NEWLINE)
    return pattern.sub(_escape, text)


def safe_lines(lines: list) -> str:
    """Lines joined by newlines, each escaped whole (a newline inside one line is escaped)."""
    return "\n".join(safe(str(line)) for line in lines)


def emit(text: str) -> None:
    """One block of output; characters the terminal's encoding lacks are replaced, never a traceback."""
    stream = sys.stdout
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        stream.flush()
        stream.buffer.write((text + "\n").encode(stream.encoding or "utf-8", "replace"))
    stream.flush()
