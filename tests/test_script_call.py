"""A launch script run with arguments (issue 19): ``sbatch [--nodes=N] job.sh CONFIG.toml --k=v`` on meshlint's
command line or inside a driver script. The job script is read with $1, "$@" and shift bound to the call's
words and sbatch's own options winning over its #SBATCH lines, as sbatch and bash run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from meshlint.engine.check import Options, check_all
from meshlint.engine.ruleset import load_rules
from meshlint.inputs.scripts import read_launch_script
from meshlint.inputs.script_call import call_from_argv

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "fixtures" / "kempnerforge" / "7b_32gpu_fsdp.toml"

# the shape of KempnerForge's scripts/slurm/multinode.sh (config as $1, the rest as overrides), our own words
JOB = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
set -euo pipefail
CONFIG="${1:?Usage: job.sh <config.toml> [overrides...]}"
shift
OVERRIDES="$@"
srun --kill-on-bad-exit=1 \\
    uv run python scripts/train.py "${CONFIG}" ${OVERRIDES}
"""


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text("# stand-in\n")
    (tmp_path / "configs").mkdir()
    # the fixture without its "# Launch: srun --nodes=8 ..." comment, so that only the launch gives the world
    text = "".join(line for line in CONFIG.read_text().splitlines(True) if not line.startswith("#"))
    (tmp_path / "configs" / "7b.toml").write_text(text)
    (tmp_path / "job.sh").write_text(JOB)
    return tmp_path


def _cli(tmp_path: Path, *args: str):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "meshlint", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_sbatch_on_the_command_line_binds_the_arguments_and_its_nodes(tmp_path):
    _tree(tmp_path)
    r = _cli(tmp_path, "check", "--format", "json", "--", "sbatch", "--nodes=8", "job.sh", "configs/7b.toml",
             "--distributed.tp=8")
    doc = json.loads(r.stdout)
    [f] = doc["files"]
    assert f["status"] == "checked" and f["world_size"] == 32 and f["nodes"] == 8   # --nodes=8 beats #SBATCH's 2
    assert "sbatch --nodes=8 (the call)" in f["world_size_source"]
    [tp] = [x for x in f["findings"] if x["rule"] == "ML201"]            # tp = 8 over 4-GPU nodes
    assert tp["line"] == 10 and f["path"].startswith("job.sh:10::")   # where "$@" reaches train.py
    assert any(n.startswith("launch: read as run by: sbatch --nodes=8 job.sh") for n in f["notes"])
    assert r.returncode == 1


def test_without_sbatch_options_the_scripts_own_allocation_counts(tmp_path):
    _tree(tmp_path)
    r = _cli(tmp_path, "check", "--format", "json", "--", "bash", "job.sh", "configs/7b.toml")
    [f] = json.loads(r.stdout)["files"]
    assert (f["world_size"], f["gpus_per_node"]) == (8, 4) and "(the call)" not in f["world_size_source"]
    assert not [x for x in f["findings"] if x["severity"] == "error" and x["rule"] == "ML201"]


def test_a_script_the_command_names_that_is_not_there_is_exit_2(tmp_path):
    r = _cli(tmp_path, "check", "--", "sbatch", "--nodes=2", "nothere.sh", "c.toml")
    assert r.returncode == 2 and "nothere.sh, which is not there" in r.stderr and "Traceback" not in r.stderr


def test_positional_words_shift_and_the_rest(tmp_path):
    root = _tree(tmp_path)
    call = call_from_argv(["sbatch", str(root / "job.sh"), "configs/7b.toml", "--train.max_steps=50",
                           "--distributed.tp=2"])
    [launch] = read_launch_script(call.path, call=call)
    assert launch.config == "configs/7b.toml"
    assert [(o.path, o.value) for o in launch.overrides] == [("train.max_steps", 50), ("distributed.tp", 2)]
    assert {o.position[1] for o in launch.overrides} == {10}   # positioned where the script expands them
    # without the call the config is $1, an argument the script does not determine
    [plain] = read_launch_script(str(root / "job.sh"))
    assert plain.config is None or "\x00" in str(plain.config) or plain.unresolved


def test_a_driver_script_is_followed_one_level(tmp_path):
    root = _tree(tmp_path)
    (root / "sweep.sh").write_text(
        "#!/bin/bash\nCFG=configs/7b.toml\n"
        "sbatch --nodes=2 job.sh $CFG --distributed.tp=8\n"
        "sbatch --nodes=8 job.sh \"$CFG\"\n"
        "for n in 1 2; do\n  sbatch --nodes=$n job.sh $CFG\ndone\n"
        "sbatch sweep.sh\n"                        # a script that submits itself is not followed again
        "sbatch missing.sh $CFG\n")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        reports = check_all("sweep.sh", Options(rules=load_rules()))
    finally:
        os.chdir(cwd)
    assert [r.status for r in reports] == ["checked"] * 3
    worlds = [r.topology.world_size for r in reports]
    assert worlds == [8, 32, None]           # the loop's $n is not one value: the world is not guessed
    notes = [r.resolution.notes[0] for r in reports]
    assert notes == ["launch: submitted by sweep.sh line 3", "launch: submitted by sweep.sh line 4",
                     "launch: submitted by sweep.sh line 6"]
    tp = [f for f in reports[0].findings if f.code == "ML201"]
    assert tp and tp[0].file.endswith("job.sh")
