"""``--format github``: GitHub Actions workflow commands, so findings show up on the PR diff.

    ::error file=configs/x.toml,line=12,col=1,title=ML103 degree-product-mismatch::message

Escaping follows the Actions toolkit: in the message ``%``, CR and LF become
``%25``, ``%0D``, ``%0A``; in property values also ``:`` and ``,`` (``%3A``, ``%2C``).
"""

from __future__ import annotations

from meshlint.engine.filereport import FileReport, finding_file, input_error_finding

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _workspace_path(path: str) -> str:
    """GitHub matches annotations by repository-relative path: make an absolute one relative."""
    import os

    if not os.path.isabs(path):
        return path
    root = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def render(reports: list[FileReport], show_skips: bool = False) -> str:
    """One workflow command a finding; skip notes (what was not checked) only with ``show_skips``, else one
    notice counts them."""
    folded: dict = {}
    lines = [line for report in reports for line in report_lines(report, show_skips, folded)]
    return "\n".join(lines + closing_lines(folded))


def report_lines(report: FileReport, show_skips: bool = False, folded: dict | None = None) -> list[str]:
    """One file's workflow commands; a skip note not shown is counted in ``folded`` instead."""
    lines = []
    findings = [input_error_finding(report.error)] if report.error else report.findings
    for f in findings:
        if f.skip and not show_skips:
            if folded is not None:
                folded[(f.code, f.name)] = folded.get((f.code, f.name), 0) + 1
            continue
        message = f.message + (f"\nhelp: {f.help}" if f.help else "")
        props = (f"file={escape_property(_workspace_path(finding_file(report, f)))},line={f.line},col={f.col},"
                 f"title={escape_property(f'{f.code} {f.name}')}")
        lines.append(f"::{_COMMAND[f.severity]} {props}::{escape_data(message)}")
    return lines


def closing_lines(folded: dict) -> list[str]:
    """One notice counting the skip notes not shown (none when there are none)."""
    if not folded:
        return []
    from meshlint.report.text import skips_line

    return [f"::notice title=meshlint skip notes::{escape_data(skips_line(folded))}"]
