"""The human report: ``path:line:col: CODE [severity] message``, help lines, one summary line."""

from __future__ import annotations

import os
import sys

from meshlint.engine.filereport import FileReport, finding_file, input_error_finding
from meshlint.report.terminal import safe

_STYLE = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[1;36m", "path": "\x1b[1m",
          "help": "\x1b[2m", "code": "\x1b[1m"}
_RESET = "\x1b[0m"


def want_color(mode: str = "auto", stream=None) -> bool:
    """``--color``; for auto: NO_COLOR (any value) turns it off, FORCE_COLOR on, else a terminal."""
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def render(reports: list[FileReport], quiet: bool = False, use_color: bool = False,
           show_skips: bool = False) -> str:
    """The report; skip notes (findings that only say what was not checked) are counted into one line
    after the findings unless ``show_skips``."""
    lines: list[str] = []
    folded: dict = {}
    for report in reports:
        lines += report_lines(report, quiet, use_color, show_skips, folded)
    lines += closing_lines(reports, folded, quiet, use_color)
    return "\n".join(lines)


def closing_lines(reports: list, folded: dict, quiet: bool = False, use_color: bool = False) -> list[str]:
    """What follows the files' lines: the skip notes not shown, the torchtitan semantics applied, the summary."""
    paint = (lambda text: f"{_STYLE['help']}{text}{_RESET}") if use_color else (lambda text: text)
    lines = [paint(skips_line(folded))] if folded else []
    if not quiet:
        lines.extend(paint(safe(line)) for line in framework_lines(reports))
    lines.append(summary_line(reports))
    return lines


def report_lines(report: FileReport, quiet: bool = False, use_color: bool = False, show_skips: bool = False,
                 folded: dict | None = None) -> list[str]:
    """One file's lines of the report (the closing lines aside): what ``render`` prints for it. A skip note
    not shown is counted in ``folded`` ((code, name) -> count) instead."""
    def paint(style: str, text: str) -> str:
        return f"{_STYLE[style]}{text}{_RESET}" if use_color else text

    lines: list[str] = []
    path = safe(report.path)  # every piece from a file, a rule or a path is escaped before it is painted
    if report.status == "skipped":
        if not quiet:
            lines.append(f"{paint('path', path)}: skipped: {safe(report.note or '')}")
        return lines
    findings = [input_error_finding(report.error)] if report.error else report.findings
    for f in findings:
        if quiet and f.severity == "info":
            continue
        if f.skip and not show_skips:
            if folded is not None:
                folded[(f.code, f.name)] = folded.get((f.code, f.name), 0) + 1
            continue
        where = safe(f"{finding_file(report, f)}:{f.line}:{f.col}:")
        lines.append(f"{paint('path', where)} {paint('code', safe(f.code))} "
                     f"{paint(f.severity, f'[{f.severity}]')} {safe(f.message)}")
        for help_line in (f.help or "").split("\n"):  # only newlines break a help text into lines
            if help_line:
                lines.append(paint("help", f"  help: {safe(help_line)}"))
    if report.diff_note and report.diff_note.startswith("new since"):
        lines.append(f"{paint('path', path)}: {safe(report.diff_note)} (no earlier mesh to compare with)")
    if report.diff is not None and not report.diff.same:
        lines.append(f"{paint('path', path)}: resolved mesh changed since {safe(str(report.diff.base))}:")
        lines.extend("  " + line for line in  # diff.render escapes each of its lines
                     report.diff.render(f"{report.path}@{report.diff.base}", report.path).split("\n"))
    return lines


def skips_line(folded: dict) -> str:
    """One line for the skip notes not shown: how many of each, and how to see them or run what they skip."""
    total = sum(folded.values())
    kinds = ", ".join(f"{name} ({code}) {n}" for (code, name), n in sorted(folded.items()))
    what = {code for code, _ in folded}
    hint = "; pass --world-size N --gpus-per-node G to run the rules they skip" if what & {"ML105", "ML109"} else ""
    return f"note: {_n(total, 'skip note')} not shown ({kinds}){hint}; --show-skips lists them"


def framework_lines(reports: list[FileReport]) -> list:
    """One line per torchtitan semantics applied to registry configs in this run: which, how decided, and
    what the checkout has beyond them (meshlint/frameworks/torchtitan/ttdiff.py)."""
    seen: dict = {}
    for r in reports:  # a streamed run keeps only a Husk, with the spec's framework as `applied`
        fw = getattr(r, "applied", None) or getattr(getattr(r, "spec", None), "framework", None) or {}
        if r.status == "checked" and "unmodelled" in fw:
            seen.setdefault((fw.get("version"), fw.get("decided_by")), fw["unmodelled"])
    if not seen:  # a TOML-only run imports nothing more
        return []
    from meshlint.frameworks.torchtitan.ttdiff import summary

    return [summary(version, how, items) for (version, how), items in seen.items()]


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
    suppressed = sum(len(r.suppressed) for r in reports)
    # a registry or launch script holds several configs: count configs, not files
    noun = "config" if any("::" in r.path for r in reports) else "file"
    head = f"{_n(checked, noun)} checked"
    if skipped:
        head += f", {skipped} skipped"
    if unreadable:
        head += f", {unreadable} unreadable"
    tail = f" ({suppressed} suppressed)" if suppressed else ""
    if not any(counts.values()):
        return (head + ": no findings" if not unreadable else head) + tail + "."
    parts = [_n(counts["error"], "error"), _n(counts["warning"], "warning"), f"{counts['info']} info"]
    return f"{head}: {', '.join(parts)} in {_n(dirty, noun)}{tail}."


def _n(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
