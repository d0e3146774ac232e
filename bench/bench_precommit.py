#!/usr/bin/env python3
"""Run time of the meshlint pre-commit hook on a repository of 30 configs.

    python bench/bench_precommit.py [--repeat 10]

Creates a throw-away git repository with 30 generated configs (the mix of
bench_check.py) and a .pre-commit-config.yaml that points at this checkout's
current commit, installs the hook environment once (not timed: pre-commit
caches it), then times ``pre-commit run meshlint --all-files`` (what a commit
that touches every config costs, pre-commit's own overhead included) and,
for comparison, the same ``meshlint check`` inside the hook's environment.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_check import generate  # noqa: E402

ROOT = HERE.parent


def timed(cmd, cwd, env, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(proc.stdout + proc.stderr)
    return min(times) * 1000, statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    pre_commit = Path(sys.executable).parent / "pre-commit"
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        generate(repo / "configs", 30)
        (repo / ".pre-commit-config.yaml").write_text(
            f"repos:\n  - repo: {ROOT}\n    rev: {sha}\n    hooks:\n      - id: meshlint\n        files: ^configs/\n")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
        env.update(PRE_COMMIT_HOME=str(Path(tmp) / "home"), GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b",
                   GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
        for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-q", "-m", "configs"],
                    [str(pre_commit), "install-hooks"]):
            proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(proc.stdout + proc.stderr)
        hook_best, hook_median = timed([str(pre_commit), "run", "meshlint", "--all-files"], repo, env, args.repeat)
        (meshlint,) = list((Path(tmp) / "home").glob("repo*/py_env-*/bin/meshlint"))
        files = sorted(str(p.relative_to(repo)) for p in (repo / "configs").glob("*.toml"))
        direct_best, direct_median = timed([str(meshlint), "check", *files], repo, env, args.repeat)
    print(f"pre-commit run meshlint --all-files (30 configs): best {hook_best:.0f} ms, median {hook_median:.0f} ms")
    print(f"meshlint check in the hook's environment (30 configs): best {direct_best:.0f} ms, "
          f"median {direct_median:.0f} ms")


if __name__ == "__main__":
    main()
