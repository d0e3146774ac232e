"""The human report: ``path:line:col: CODE [severity] message``, help lines, one summary line."""

from __future__ import annotations

from meshlint.check import FileReport, input_error_finding


def render(reports: list[FileReport], quiet: bool = False) -> str:
    lines: list[str] = []
    for report in reports:
        if report.status == "skipped":
            if not quiet:
                lines.append(f"{report.path}: skipped: {report.note}")
            continue
        findings = [input_error_finding(report.error)] if report.error else report.findings
        for f in findings:
            if quiet and f.severity == "info":
                continue
            lines.append(f"{report.path}:{f.line}:{f.col}: {f.code} [{f.severity}] {f.message}")
            for help_line in (f.help or "").splitlines():
                lines.append(f"  help: {help_line}")
        if report.diff is not None and not report.diff.same:
            lines.append(f"{report.path}: resolved mesh changed since {report.diff.base}:")
            lines.extend("  " + line for line in
                         report.diff.render(f"{report.path}@{report.diff.base}", report.path).splitlines())
    lines.append(summary_line(reports))
    return "\n".join(lines)


def summary_line(reports: list[FileReport]) -> str:
    counts = {"error": 0, "warning": 0, "info": 0}
    dirty = 0
    for r in reports:
        if r.findings:
            dirty += 1
        for f in r.findings:
            counts[f.severity] += 1
    checked = sum(r.status == "checked" for r in reports)
    skipped = sum(r.status == "skipped" for r in reports)
    unreadable = sum(r.status == "error" for r in reports)
    head = f"{_n(checked, 'file')} checked"
    if skipped:
        head += f", {skipped} skipped"
    if unreadable:
        head += f", {unreadable} unreadable"
    if not any(counts.values()):
        return head + ": no findings." if not unreadable else head + "."
    parts = [_n(counts["error"], "error"), _n(counts["warning"], "warning"), f"{counts['info']} info"]
    return f"{head}: {', '.join(parts)} in {_n(dirty, 'file')}."


def _n(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
