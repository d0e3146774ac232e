"""``meshlint check``'s report written as the files are checked: each file's part rendered once its findings are out.

A run over 10,000 configs kept every report (source text, syntax tree, facts: ~27 KB a config) to
the end. Here each report is rendered when it is added (text and GitHub lines; its entry of the
JSON array), and only a Husk of it is kept: what the summary line, the exit code and SARIF read
(its path, status, findings, suppressed findings and ``--fail-on``). The output is the same bytes as rendering
all reports at the end (the formats' own ``render`` functions), so memory no longer grows with the
files' size. Output is held until ``FLUSH_BYTES`` of it are waiting, so a run whose report is
smaller than that prints nothing before a usage error stops it, as before; a longer one is written
in pieces. SARIF lists rule descriptors before results, so it renders at the end from the stripped
reports.
"""

from __future__ import annotations

import sys

from meshlint.engine.filereport import FileReport

FLUSH_BYTES = 1 << 20


class ReportStream:
    def __init__(self, fmt: str = "text", quiet: bool = False, color: str = "auto", show_skips: bool = False):
        self.fmt = fmt
        self.quiet = quiet
        self.show_skips = show_skips
        self.folded: dict = {}     # skip notes not shown: (code, name) -> count, for the closing line
        self.kept: list = []       # a Husk of every report added: what the summary and the exit code read
        self._parts: list = []
        self._size = 0
        self._files = 0            # JSON entries written so far
        self._use_color = False
        if fmt == "text":
            from meshlint.report import text

            self._use_color = text.want_color(color)
        elif fmt == "json":
            from meshlint.report import json_report

            head = json_report.dumps({"version": json_report.VERSION,
                                      "tool": {"name": "meshlint", "version": json_report._version()}, "files": 0})
            self._write(head[:head.rindex("0")] + "[")  # the document up to its files array, as render() writes it

    def add(self, report) -> dict | None:
        """Render ``report``, then strip it; returns its JSON report entry (for the results cache) in JSON runs."""
        piece = None
        if self.fmt == "text":
            from meshlint.report import text

            for line in text.report_lines(report, self.quiet, self._use_color, self.show_skips, self.folded):
                self._write(line + "\n")
        elif self.fmt == "github":
            from meshlint.report import github

            for line in github.report_lines(report, self.show_skips, self.folded):
                self._write(line + "\n")
        elif self.fmt == "json":
            from meshlint.report import json_report

            piece = json_report.file_json(report)
            body = json_report.dumps_entry(piece).replace("\n", "\n    ")
            self._write(("\n    " if not self._files else ",\n    ") + body)
            self._files += 1
        self.kept.append(Husk(report))
        return piece

    def finish(self, code: int, fail_on: str, rules=None) -> None:
        """The summary (text, JSON) or the whole document (SARIF), then everything still held."""
        reports = self.kept
        if self.fmt == "text":
            from meshlint.report import text

            for line in text.closing_lines(reports, self.folded, self.quiet, self._use_color):
                self._write(line + "\n")
        elif self.fmt == "github":
            from meshlint.report import github

            for line in github.closing_lines(self.folded):
                self._write(line + "\n")
        elif self.fmt == "json":
            from meshlint.report import json_report

            summary = json_report.dumps(json_report.summary(reports, code, fail_on)).replace("\n", "\n  ")
            self._write(("\n  ]" if self._files else "]") + ',\n  "summary": ' + summary + "\n}\n")
        elif self.fmt == "sarif":
            from meshlint.report import sarif

            self._write(sarif.render(reports, rules or []) + "\n")
        self.flush()

    # ------------------------------------------------------------------------------- output

    def _write(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        if self._size >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._parts:
            return
        text, self._parts, self._size = "".join(self._parts), [], 0
        stream = sys.stdout
        try:
            stream.write(text)
        except UnicodeEncodeError:  # characters the terminal's encoding lacks are replaced, never a traceback
            stream.flush()
            stream.buffer.write(text.encode(stream.encoding or "utf-8", "replace"))
        stream.flush()


class Husk:
    """What is kept of a report once it is out: what the summary line, the exit code and SARIF read.

    A field a new summary reads must be added here (its value copied from the report in ``__init__``).
    """

    __slots__ = ("path", "status", "dialect", "note", "error", "findings", "suppressed", "fail_on", "applied")

    def __init__(self, report):
        self.path = report.path
        self.status = report.status
        self.dialect = report.dialect
        self.note = report.note
        self.error = report.error
        self.findings = tuple(report.findings)
        self.suppressed = tuple(report.suppressed)
        self.fail_on = report.fail_on
        framework = getattr(getattr(report, "spec", None), "framework", None)  # text.framework_lines reads it
        self.applied = framework if framework and "unmodelled" in framework else None

    worst = FileReport.worst
