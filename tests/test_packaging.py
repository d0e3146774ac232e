"""meshlint as users install it: a built wheel (non-editable, as pre-commit installs hooks)
and the pre-commit hook itself, run with ``pre-commit try-repo``.

These build and install for real (from the package registry), so they take
about a minute; they are the proof that the hook works outside this checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

BAD = "# meshlint: world_size=32 gpus_per_node=4\n[model]\nn_heads = 64\n\n[distributed]\ntp = 8\n"
GOOD = "# meshlint: world_size=32 gpus_per_node=4\n[model]\nn_heads = 64\n\n[distributed]\ntp = 4\n"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    proc = run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)])
    if proc.returncode != 0 and "No module named build" in proc.stderr:
        pytest.skip("the 'build' package is not installed (pip install -e '.[test]')")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = out.glob("meshlint-*.whl")
    return path


def test_wheel_ships_the_rules_and_works_without_the_source_tree(wheel, tmp_path):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.rsplit("/", 1)[-1] for n in names if n.startswith("meshlint/_rules/")}
    assert shipped == {p.name for p in (ROOT / "rules").glob("*.toml")}
    assert "meshlint/schema/rule-v1.schema.json" in names

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    proc = run([str(python), "-m", "pip", "install", "--quiet", str(wheel)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    cfg = tmp_path / "work" / "c.toml"
    cfg.parent.mkdir()
    cfg.write_text(BAD)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = run([str(env_dir / "bin" / "meshlint"), "check", str(cfg), str(FIXTURES / "kempnerforge")],
               cwd=cfg.parent, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "ML201 [error] tp = 8 is larger than a node" in proc.stdout
    proc = run([str(python), "-c", "import meshlint.engine.rules as r, importlib.util as u; print(r.builtin_rules_dir());"
                                   "print(u.find_spec('torch') is None);"
                                   "from meshlint.engine import prebuilt; print(prebuilt.load(r.builtin_rules_dir()) is not None);"
                                   "from meshlint.engine.expr.expression import COMPILED, compiled_for;"
                                   "compiled_for('kempnerforge'); print(len(COMPILED) > 0);"
                                   "from meshlint import installed; print(installed.record() is not None);"
                                   "print(prebuilt.current_by_record(r.builtin_rules_dir(), prebuilt._module()))"],
               cwd=cfg.parent, env=env)
    rules_dir, no_torch, prebuilt_used, compiled_used, record_used, current_by_record = proc.stdout.split()
    assert rules_dir.endswith(os.path.join("site-packages", "meshlint", "_rules"))
    assert no_torch == "True"  # the core install never brings torch
    assert prebuilt_used == "True"  # the rules parsed ahead of time match meshlint/_rules: no parsing at start-up
    assert compiled_used == "True"  # and their expressions run as the Python compiled ahead of time
    assert record_used == "True"  # the results cache's code key is pip's RECORD of this install, not ~400 stats
    assert current_by_record == "True"  # and the prebuilt rules are current by RECORD: no rule file is read


def test_pre_commit_hook_via_try_repo(tmp_path):
    pre_commit = Path(sys.executable).parent / "pre-commit"
    if not pre_commit.exists():
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    (repo / "configs" / "bad.toml").write_text(BAD)
    (repo / "configs" / "good.toml").write_text(GOOD)
    (repo / "pyproject.toml").write_text('[project]\nname = "training"\n')
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-q", "-m", "configs"]):
        assert run(cmd, cwd=repo, env=env).returncode == 0
    bad = run([str(pre_commit), "try-repo", str(ROOT), "meshlint", "--files", "configs/bad.toml", "pyproject.toml"],
              cwd=repo, env=env)
    assert bad.returncode == 1, bad.stdout[-3000:] + bad.stderr[-3000:]
    assert "configs/bad.toml:6:1: ML201 [error] tp = 8 is larger than a node" in bad.stdout
    good = run([str(pre_commit), "try-repo", str(ROOT), "meshlint", "--files", "configs/good.toml", "pyproject.toml"],
               cwd=repo, env=env)
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    assert "Passed" in good.stdout
    # the hook installs the package alone (its core dependencies), never the smoke extra
    import yaml  # comes with pre-commit

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["language"] == "python" and hook["types"] == ["file"] and "additional_dependencies" not in hook
    import re

    wanted = ["configs/a.toml", "torchtitan/models/llama3/config_registry.py", "config_registry.py",
              "scripts/train.sh", "multinode_trainer.slurm", "job.sbatch"]
    assert all(re.search(hook["files"], p) for p in wanted)
    assert not any(re.search(hook["files"], p) for p in ["setup.py", "my_config_registry.py", "notes.txt"])
