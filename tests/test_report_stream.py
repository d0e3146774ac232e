"""check's streamed report (meshlint/report/stream.py): the same bytes as rendering every report at the end, and
nothing of a report kept once it is out but what the summary reads."""

from __future__ import annotations

import functools
import gc
import weakref

import pytest
from conftest import FIXTURES

from meshlint.engine.check import Options, check_all, collect_paths
from meshlint.engine.filereport import FileReport
from meshlint.report import github, json_report, sarif, stream, text
from meshlint.engine.ruleset import load_rules

RULES = load_rules()


@functools.lru_cache(maxsize=None)
def _checked() -> tuple:
    out = []
    for path in collect_paths([str(FIXTURES / "kempnerforge"), str(FIXTURES / "torchtitan_registry")])[:12]:
        out += check_all(path, Options(rules=RULES))
    out.append(FileReport("skipped.toml", "skipped", note="no parallelism section"))
    return tuple(out)


def _reports() -> list:
    return list(_checked())  # the stream never changes a report: one analysis serves every case


def _whole(fmt: str, reports: list, code: int, quiet: bool) -> str:
    if fmt == "text":
        return text.render(reports, quiet) + "\n"
    if fmt == "json":
        return json_report.render(reports, code, "error") + "\n"
    if fmt == "sarif":
        return sarif.render(reports, RULES) + "\n"
    body = github.render(reports)
    return body + "\n" if body else ""


@pytest.mark.parametrize("flush", [stream.FLUSH_BYTES, 1])
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
@pytest.mark.parametrize("which", ["all", "none", "one"])
def test_streamed_output_is_what_rendering_at_the_end_gives(capsys, monkeypatch, fmt, which, flush):
    monkeypatch.setattr(stream, "FLUSH_BYTES", flush)  # 1: written piece by piece
    reports = {"all": _reports(), "none": [], "one": _reports()[:1]}[which]
    expected = _whole(fmt, reports, 1, quiet=True)
    out = stream.ReportStream(fmt, quiet=True, color="never")
    for report in reports:
        out.add(report)
    out.finish(1, "error", RULES)
    assert capsys.readouterr().out == expected


def test_json_numbers_json_cannot_hold_are_written_as_render_writes_them(capsys):
    report = _reports()[0]
    real = json_report.file_json

    def entry(r):
        return dict(real(r), extra={"big": 10 ** 5000, "nan": float("nan")})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(json_report, "file_json", entry)
        expected = json_report.render([report], 0, "error") + "\n"
        out = stream.ReportStream("json")
        out.add(report)
        out.finish(0, "error")
    assert capsys.readouterr().out == expected


def test_a_report_is_not_kept_once_it_is_out(capsys):
    out = stream.ReportStream("text")
    (report,) = check_all(str(FIXTURES / "kempnerforge" / "cp2_8gpu.toml"), Options(rules=RULES))
    assert report.source is not None
    ref = weakref.ref(report)
    out.add(report)
    del report
    gc.collect()
    assert ref() is None  # its text, tree and facts are gone; the summary reads the Husk
    out.finish(0, "error")
    assert capsys.readouterr().out.rstrip().endswith(".")
