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
