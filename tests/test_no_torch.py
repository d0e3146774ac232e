"""The static path never imports torch: a pre-commit hook is judged by its start-up time.

A fake ``torch`` package that aborts on import is put first on the path; every
static command must still succeed. This holds whether or not the real torch
is installed.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES, run_subprocess


@pytest.fixture
def poisoned_path(tmp_path):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('meshlint imported torch on the static path')\n")
    return str(tmp_path)


@pytest.mark.parametrize("args", [
    ["check", str(FIXTURES / "kempnerforge"), str(FIXTURES / "torchtitan"), str(FIXTURES / "native")],
    ["check", "--format", "json", str(FIXTURES / "rules")],
    ["explain", str(FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml"), "--world-size", "8"],
    ["rules", "--format", "markdown"],
    ["check", str(FIXTURES / "rules" / "ML963-megatron-layers-do-not-split" / "bad_8gpu.sh")],
    ["explain", "--", "torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", "--num-layers", "8",
     "--hidden-size", "64", "--num-attention-heads", "4", "--tensor-model-parallel-size", "2"],
])
def test_static_commands_do_not_import_torch(poisoned_path, args):
    proc = run_subprocess(*args, env={"PYTHONPATH": poisoned_path})
    assert "imported torch" not in proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), proc.stderr


def test_static_commands_do_not_import_jsonschema_either(tmp_path):
    # jsonschema costs ~150 ms to import; built-in rules are validated by the tests instead.
    pkg = tmp_path / "jsonschema"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('jsonschema imported on the hot path')\n")
    proc = run_subprocess("check", str(FIXTURES / "kempnerforge"), env={"PYTHONPATH": str(tmp_path)})
    assert "jsonschema imported" not in proc.stdout + proc.stderr


def test_the_plain_hook_call_does_not_import_click_either(tmp_path):
    # `meshlint check FILE...` (what pre-commit runs) skips click's ~40 ms import
    pkg = tmp_path / "click"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('click imported on the hook path')\n")
    proc = run_subprocess("check", str(FIXTURES / "kempnerforge"), str(FIXTURES / "torchtitan"),
                          env={"PYTHONPATH": str(tmp_path)})
    assert "click imported" not in proc.stdout + proc.stderr and proc.returncode == 1


@pytest.mark.parametrize("paths", [
    [str(FIXTURES / "kempnerforge"), str(FIXTURES / "torchtitan"), str(FIXTURES / "native")],
    [str(FIXTURES / "rules" / "ML104-inferred-degree-indivisible")],
    [str(FIXTURES / "no-such-directory")],
])
def test_the_plain_hook_call_prints_exactly_what_the_click_command_prints(paths):
    # `--color auto` is the default: the click path with it must be indistinguishable
    fast = run_subprocess("check", *paths)
    full = run_subprocess("check", "--color", "auto", *paths)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert fast.stdout or fast.stderr


def test_both_ways_report_a_bad_project_configuration_alike(tmp_path):
    (tmp_path / "meshlint.toml").write_text("gpus_per_nod = 4\n")
    (tmp_path / "a_8gpu.toml").write_text("[distributed]\ntp = 2\n")
    fast = run_subprocess("check", "a_8gpu.toml", cwd=tmp_path)
    full = run_subprocess("check", "--color", "auto", "a_8gpu.toml", cwd=tmp_path)
    assert fast.returncode == full.returncode == 2
    assert fast.stderr == full.stderr and "did you mean 'gpus_per_node'" in fast.stderr
