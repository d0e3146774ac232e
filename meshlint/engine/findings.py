"""Findings: what a rule reports about one config."""

from __future__ import annotations

from meshlint.record import Record  # not typing.NamedTuple or collections.namedtuple: their imports cost every run

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


class Finding(Record):
    """code, name, severity, message, help (or None), key (or None), line, col; file: the file the line
    is in, when not the report's own path (registry configs); skip: the rule is a skip note (it says what
    was not checked), which the text and github reports fold into one summary line."""

    code: str
    name: str
    severity: str
    message: str
    help: str | None
    key: str | None
    line: int
    col: int
    file: str | None = None
    skip: bool = False

    def sort_key(self) -> tuple:
        return (self.line, self.col, -SEVERITY_RANK[self.severity], self.code)

    def to_json(self) -> dict:
        return {
            "rule": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "help": self.help,
            "key": self.key,
            "line": self.line,
            "column": self.col,
            **({"file": self.file} if self.file else {}),
            **({"skip_note": True} if self.skip else {}),
        }
