"""Findings: what a rule reports about one config."""

from __future__ import annotations

from typing import NamedTuple

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


class Finding(NamedTuple):
    code: str
    name: str
    severity: str
    message: str
    help: str | None
    key: str | None
    line: int
    col: int
    file: str | None = None   # the file the line is in, when not the report's own path (registry configs)

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
        }
