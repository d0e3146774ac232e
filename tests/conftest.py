"""Shared helpers: run meshlint on text or files, in-process or as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshlint.engine.check import Options, check_file
from meshlint.cli.commands import main
from meshlint.engine.ruleset import load_rules

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _isolated_rule_cache(tmp_path_factory):
    """Tests never read or write the user's ~/.cache."""
    os.environ["MESHLINT_CACHE_DIR"] = str(tmp_path_factory.mktemp("meshlint-cache"))
FIXTURES = ROOT / "fixtures"


@pytest.fixture(scope="session")
def rules():
    return load_rules()


@pytest.fixture
def write(tmp_path):
    """write(text, name='config.toml') -> path of a new file holding ``text``."""

    def _write(text: str | bytes, name: str = "config.toml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    return _write


@pytest.fixture
def check(rules, write):
    """check(text, name=..., **topology) -> FileReport."""

    def _check(text: str, name: str = "config.toml", **topology):
        from meshlint.mesh.topology import CliTopology

        path = write(text, name)
        return check_file(str(path), Options(rules=rules, topology=CliTopology(**topology)))

    return _check


def codes(report) -> list[str]:
    return [f.code for f in report.findings]


def run_cli(*args: str) -> tuple[int, str]:
    """In-process click invocation; returns (exit code, stdout+stderr)."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def run_cli_json(*args: str) -> tuple[int, dict]:
    code, out = run_cli(*args, "--format", "json")
    return code, json.loads(out)


def run_subprocess(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m meshlint ...`` as a real process, as a user or pre-commit runs it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "meshlint", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=120)
