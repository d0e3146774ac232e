"""``meshlint check`` with its common flags runs without click, and prints exactly what click's command prints."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import click
import pytest
from conftest import ROOT

from meshlint.cli import check_args
from meshlint.cli.commands import check as click_check
from meshlint.cli.lint import run

A = "fixtures/kempnerforge/70b_32gpu_tp4.toml"
B = "fixtures/kempnerforge/moe_8gpu_tp2_ep2.toml"
DIR = "fixtures/kempnerforge"

FAST = [  # parsed without click
    [A],
    ["--world-size", "16", "--gpus-per-node", "4", A],
    ["--nodes=2", "--gpus-per-node=4", "--format", "json", A, B],
    ["-q", "--select", "ML2,ML1", "--ignore", "ML201", "--ignore", "ML203", DIR],
    ["--format", "github", "--fail-on", "never", "--placement", "cyclic", "--world-size", "8", A],
    ["--format=sarif", "--dialect", "kempnerforge", A],
    ["--extend-select", "ML901", "--report-unused-suppressions", "--isolated", "--color", "never", "--no-cache", A],
    [A, "--quiet", "--world-size", "16777216", "--select", ""],
    ["--world-size", "8", "--nodes", "1", "--gpus-per-node", "8", "--world-size", "32", "--nodes", "4", A],
]
CLICK = [  # handed to click: its conversion, its message or its error
    ["--world-size", "08", A],
    ["--world-size", "0", A],
    ["--world-size", "16777217", A],
    ["--nodes", "2", A],
    ["--world-size", "8", "--nodes", "2", "--gpus-per-node", "8", A],
    ["--format", "xml", A],
    ["--wrold-size", "8", A],
    ["--select"],
    ["--select", "--ignore", A],
    ["--quiet=yes", A],
    ["-qq", A],
    ["--world-size", "8"],
    ["--", A],
    ["no-such-file.toml", "--world-size", "8"],
    ["--help"],
    ["--rules", DIR, A],
]


@pytest.mark.parametrize("argv", FAST, ids=" ".join)
def test_common_flags_are_parsed_without_click(argv):
    assert check_args.parse(argv) is not None


@pytest.mark.parametrize("argv", CLICK, ids=" ".join)
def test_anything_else_goes_to_click(argv):
    assert check_args.parse(argv) is None


def _run(argv: list, via_click: bool) -> tuple:
    env = {**os.environ, "MESHLINT_NO_CACHE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    if via_click:  # click's command itself, whatever the entry point would do
        cmd = [sys.executable, "-c", "import sys; from meshlint.cli.commands import main; sys.argv[0] = 'meshlint'; main()"]
    else:
        cmd = [sys.executable, "-c", "import sys; from meshlint.cli.entry import main; sys.argv[0] = 'meshlint'; main();"]
    proc = subprocess.run([*cmd, "check", *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("argv", FAST + CLICK[:6], ids=" ".join)
def test_both_ways_print_the_same(argv):
    assert _run(argv, via_click=False) == _run(argv, via_click=True)


def test_a_flagged_check_never_imports_click():
    probe = ("import sys; from meshlint.cli.entry import main; sys.argv = ['meshlint', 'check', '--world-size', '16', "
             f"'--gpus-per-node', '4', '-q', '--format', 'json', {A!r}]\ntry:\n    main()\nexcept SystemExit:\n"
             "    pass\nprint('click' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "MESHLINT_NO_CACHE": "1", "PYTHONPATH": str(ROOT)})
    assert proc.stderr.strip().splitlines()[-1] == "False", proc.stderr[-2000:]


def test_the_table_agrees_with_clicks_declaration_of_check():
    params = {opt: p for p in click_check.params for opt in p.opts}
    for flag, (dest, kind) in check_args.OPTIONS.items():
        param = params[flag]
        assert param.name == {"cache": "no_cache"}.get(dest, dest), flag
        if kind == "flag":
            assert param.is_flag and not param.multiple, flag
        elif kind == "list":
            assert param.multiple, flag
        elif kind == "count":
            assert isinstance(param.type, click.IntRange) and (param.type.min, param.type.max) == (1, check_args.MAX_WORLD)
        else:
            assert isinstance(param.type, click.Choice) and tuple(param.type.choices) == kind, flag
            if isinstance(param.default, str):  # a default the fast path leaves to lint.run's own
                assert param.default == inspect.signature(run).parameters[dest].default, flag


@pytest.mark.parametrize("argv", [[A, B], ["--format", "json", DIR], ["--world-size", "0", A]], ids=" ".join)
def test_the_installed_command_skips_teardown_but_prints_and_exits_the_same(argv):
    # entry.console ends the process with os._exit once stdout and stderr are flushed
    env = {**os.environ, "MESHLINT_NO_CACHE": "1", "PYTHONPATH": str(ROOT)}
    console = "import sys; from meshlint.cli.entry import console; sys.argv[0] = 'meshlint'; console()"
    proc = subprocess.run([sys.executable, "-c", console, "check", *argv], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == _run(argv, via_click=False)
