"""The fuzzer, short: generated configs, rule packs and command lines never give a traceback.

A derandomized hypothesis run (the same inputs every time, no example database)
of each generator in tests/fuzzgen.py through meshlint's click app in-process,
checked by its oracle: documented exit codes, schema-valid JSON, valid GitHub
workflow commands, no raw control character on the terminal, bounded time. The
long run is ``python bench/fuzz.py`` (its last figures are in docs/benchmarks.md).
"""

from __future__ import annotations

import pytest
from fuzzgen import Case, cases, config_bytes, describe, other_input, rule_pack, run_case
from hypothesis import HealthCheck, given, settings

SHORT = settings(max_examples=40, deadline=None, derandomize=True, database=None, print_blob=False,
                 suppress_health_check=list(HealthCheck))
MAX_SECONDS = 20  # CPU seconds per input, a hang guard; bench/fuzz.py reports the real worst case


def _assert_ok(case: Case, tmp_path) -> None:
    result = run_case(case, str(tmp_path))
    assert not result.problems, describe(case) + "\n" + "\n".join(result.problems)
    assert result.cpu_seconds < MAX_SECONDS, describe(case)  # CPU: a hang guard a loaded machine cannot trip


@SHORT
@given(case=cases())
def test_command_lines(case, tmp_path_factory):
    _assert_ok(case, tmp_path_factory.mktemp("fuzz"))


@SHORT
@given(raw=config_bytes())
def test_configs_checked_as_json(raw, tmp_path_factory):
    _assert_ok(Case((("config.toml", raw),), (), ("check", "{f0}", "--format", "json"), "check"),
               tmp_path_factory.mktemp("fuzz"))


@settings(SHORT, max_examples=20)
@given(raw=config_bytes())
def test_configs_explained_on_a_big_world(raw, tmp_path_factory):
    argv = ("explain", "{f0}", "--world-size", "16777216", "--gpus-per-node", "16777215", "--rank", "16777215")
    _assert_ok(Case((("config.toml", raw),), (), argv, "explain"), tmp_path_factory.mktemp("fuzz"))


@SHORT
@given(item=other_input())
def test_registries_scripts_and_saved_configs(item, tmp_path_factory):
    # the readers of issue 10 (torchtitan registries read with ast, launch scripts, saved JSON) under the
    # same oracle, checked and explained (a registry with several functions: explain refuses to pick one)
    name, raw = item
    for argv, command in ((("check", "{f0}", "--format", "json"), "check"), (("explain", "{f0}"), "explain")):
        _assert_ok(Case(((name, raw),), (), argv, command), tmp_path_factory.mktemp("fuzz"))


@settings(SHORT, max_examples=20)
@given(pack=rule_pack(), raw=config_bytes())
def test_rule_packs(pack, raw, tmp_path_factory):
    case = Case((("config.toml", raw),), tuple(pack.items()),
                ("check", "{f0}", "--rules", "{pack}", "--world-size", "8", "--format", "json"), "check")
    _assert_ok(case, tmp_path_factory.mktemp("fuzz"))


@pytest.mark.parametrize("argv", [
    ("check", "{fifo}"), ("check", "{dir}"), ("explain", "{fifo}"), ("diff", "{fifo}", "{f0}"),
    ("rules", "--rules", "{f0}"), ("check", "{missing}", "--format", "sarif"),
])
def test_paths_that_are_not_config_files(argv, tmp_path):
    _assert_ok(Case((("config.toml", b"[distributed]\ntp = 2\n"),), (), argv, argv[0]), tmp_path)
