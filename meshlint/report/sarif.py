"""``--format sarif``: SARIF 2.1.0, as GitHub code scanning reads it.

Every loaded rule is described in ``tool.driver.rules`` (id, name,
shortDescription, fullDescription, help text and markdown, default level);
every finding is a result with its ruleId, level, message and a physical
location whose uri is relative to the repository root (``%SRCROOT%``), so
alerts stay stable across runs. ``partialFingerprints`` are computed from the
rule, the file and the config key (not the line), so an alert survives edits
elsewhere in the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

from meshlint import __version__
from meshlint.engine.filereport import FileReport, finding_file, input_error_finding
from meshlint.errors import INPUT_ERRORS

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def repo_root(start: str = ".") -> str:
    try:
        proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True, text=True,
                              timeout=10)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return os.getcwd()


def _location(path: str, root: str) -> dict:
    """Relative to %SRCROOT% inside the repository; an absolute file:// uri (no base) outside it."""
    rel = os.path.relpath(os.path.abspath(path), root)
    if rel.startswith(".."):
        return {"uri": "file://" + os.path.abspath(path).replace(os.sep, "/")}
    return {"uri": rel.replace(os.sep, "/"), "uriBaseId": "%SRCROOT%"}


def _rule_descriptor(rule) -> dict:
    doc = rule.doc or {}
    parts = [f"**{rule.code} {rule.name}** ({rule.severity})", "", doc.get("what", rule.summary)]
    if doc.get("why"):
        parts += ["", f"**Why it matters.** {doc['why']}"]
    if doc.get("bad"):
        parts += ["", "Bad:", "", "```toml", doc["bad"].strip(), "```"]
    if doc.get("good"):
        parts += ["", "Good:", "", "```toml", doc["good"].strip(), "```"]
    if doc.get("fix"):
        parts += ["", f"**Fix.** {doc['fix']}"]
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": doc.get("what", rule.summary)},
        "help": {"text": doc.get("fix", rule.summary), "markdown": "\n".join(parts)},
        "defaultConfiguration": {"level": LEVEL[rule.severity]},
        "properties": {"tags": ["parallelism", "device-mesh"] + (list(rule.dialects) if rule.dialects else [])},
    }


def _input_error_descriptor(code: str) -> dict:
    name, summary = INPUT_ERRORS[code]
    return {"id": code, "name": name, "shortDescription": {"text": summary}, "fullDescription": {"text": summary},
            "help": {"text": summary, "markdown": f"**{code} {name}**: {summary}"},
            "defaultConfiguration": {"level": "error"}}


def render(reports: list[FileReport], rules: list) -> str:
    root = repo_root()
    seen: dict[str, int] = {}
    descriptors = []
    for rule in rules:
        if rule.code not in seen:
            seen[rule.code] = len(descriptors)
            descriptors.append(_rule_descriptor(rule))
    results = []
    for report in reports:
        findings = [input_error_finding(report.error)] if report.error else report.findings
        for f in findings:
            if f.code not in seen:
                seen[f.code] = len(descriptors)
                descriptors.append(_input_error_descriptor(f.code) if f.code in INPUT_ERRORS else
                                   {"id": f.code, "name": f.name, "shortDescription": {"text": f.name}})
            location = _location(finding_file(report, f), root)
            uri = location["uri"]
            text = f.message + (f"\nhelp: {f.help}" if f.help else "")
            fingerprint = hashlib.sha256(f"{f.code}\0{uri}\0{f.key or f.line}".encode()).hexdigest()[:32]
            results.append({
                "ruleId": f.code,
                "ruleIndex": seen[f.code],
                "level": LEVEL[f.severity],
                "message": {"text": text},
                "locations": [{"physicalLocation": {
                    "artifactLocation": location,
                    "region": {"startLine": f.line, "startColumn": f.col},
                }}],
                "partialFingerprints": {"meshlintFinding/v1": fingerprint},
                "properties": {"meshlint.key": f.key, "meshlint.name": f.name},
            })
    doc = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "meshlint", "version": __version__, "semanticVersion": __version__,
                                "informationUri": "https://github.com/meshlint/meshlint", "rules": descriptors}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + root.replace(os.sep, "/").rstrip("/") + "/"}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2)
