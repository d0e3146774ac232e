"""Inline suppressions in the checked TOML file.

    tp = 8   # meshlint: ignore[ML201]               this line
    # meshlint: ignore[tp-group-crosses-nodes]     a comment alone on its line: the line below
    ep = 2                                         (codes or names; several: ignore[ML203, ML312])
    # meshlint: ignore-file[ML105]                 anywhere: the whole file
    # meshlint: ignore                             without brackets: every rule (on that line)

Text after the brackets is free (a reason: ``ignore[ML203] -- EP across node pairs is
the plan``). A suppression that suppresses nothing is reported by ML901 when asked
(``--report-unused-suppressions``), so stale ones do not pile up.
"""

from __future__ import annotations

from meshlint import fastre
from meshlint.record import Record

_SUPPRESS = fastre.compile(r"\b(ignore-file|ignore)\b(?:\[([^\]]*)\])?")
_PREFIX = fastre.compile(r"^\s*meshlint\s*:")


class Suppression(Record):
    line: int             # where the comment is
    lines: tuple          # the finding lines it covers (empty: the whole file)
    selectors: tuple      # codes or names; empty: every rule
    text: str             # the comment, for messages


def parse(source) -> list[Suppression]:
    out = []
    lines = None
    for line, col, text in source.comments:
        if not _PREFIX.match(text):
            continue
        rest = _PREFIX.sub("", text, count=1)
        for match in _SUPPRESS.finditer(rest):
            selectors = tuple(s.strip() for s in (match.group(2) or "").split(",") if s.strip())
            if match.group(1) == "ignore-file":
                covers: tuple = ()
            else:
                if lines is None:
                    lines = source.text.splitlines()
                alone = not lines[line - 1][: col - 1].strip()
                covers = (line, line + 1) if alone else (line,)
            out.append(Suppression(line, covers, selectors, "#" + text))
    return out


def _covers(s: Suppression, finding) -> bool:
    if s.lines and finding.line not in s.lines:
        return False
    return not s.selectors or finding.code in s.selectors or finding.name in s.selectors


def apply(suppressions: list[Suppression], findings: list) -> tuple[list, list, set]:
    """(kept findings, suppressed findings, indices of suppressions that were used)."""
    kept, suppressed, used = [], [], set()
    for f in findings:
        hits = [i for i, s in enumerate(suppressions) if _covers(s, f)]
        if hits:
            suppressed.append(f)
            used.update(hits)
        else:
            kept.append(f)
    return kept, suppressed, used


def unused(suppressions: list[Suppression], used: set, findings_suppressed: list, known: dict) -> list[dict]:
    """One record per selector (or bare comment) that suppressed nothing, for rule ML901."""
    out = []
    for i, s in enumerate(suppressions):
        if not s.selectors:
            if i not in used:
                out.append({"line": s.line, "selector": None, "reason": "suppresses nothing", "comment": s.text})
            continue
        for selector in s.selectors:
            rule = known.get(selector)
            if rule is None:
                out.append({"line": s.line, "selector": selector, "reason": "is not a known rule code or name",
                            "comment": s.text})
                continue
            hit = any(_covers(Suppression(s.line, s.lines, (selector,), s.text), f) for f in findings_suppressed)
            if not hit:
                where = "in this file" if not s.lines else f"on line {s.lines[-1] if len(s.lines) == 2 else s.line}"
                out.append({"line": s.line, "selector": selector,
                            "reason": f"suppresses nothing: {rule.code} ({rule.name}) reports nothing {where}",
                            "comment": s.text})
    return out
