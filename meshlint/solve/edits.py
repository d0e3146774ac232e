"""Text edits for ``meshlint fix``: spans of the original text replaced, never overlapping (shared by fix.py's
TOML/YAML/registry edits and fix_launch.py's launch-script edits)."""

from __future__ import annotations

from typing import NamedTuple

from meshlint.errors import MeshlintError


class FixError(MeshlintError):
    """A fix that cannot be made safely (exit 2): the message says why, and nothing was written."""


class Edit(NamedTuple):
    start: int          # character offsets into the original text
    end: int
    text: str
    what: str           # "distributed.tp 4 -> 8", for messages


class Plan(NamedTuple):
    path: str           # the file to write
    old: str
    new: str
    edits: list
    notes: list


def apply(text: str, edits: list) -> str:
    out, at = [], 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < at:
            raise FixError("two edits overlap (the same value set twice?): fix it by hand")
        out.append(text[at:e.start])
        out.append(e.text)
        at = e.end
    out.append(text[at:])
    return "".join(out)


def line_starts(text: str) -> list:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def offset(text: str, line: int, col: int, starts: list | None = None) -> int:
    starts = starts or line_starts(text)
    if not 1 <= line <= len(starts):
        raise FixError(f"line {line} is outside the file")
    return starts[line - 1] + col - 1


def newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"
