"""torchtitan v0.2 launch lines and scripts (meshlint/inputs/tt_v02_launch.py, toml_launch.py):
``--job.config_file X.toml`` with v0.2 overrides, parity with v0.2's own ConfigManager (tyro), the
real run_train.sh and multinode_trainer.slurm of the TOML era from the mirror."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshlint.engine.check import Options, run_checks
from meshlint.errors import InputError
from meshlint.inputs.launch import parse_launch_args
from meshlint.inputs.scripts import read_launch_script
from meshlint.engine.units import analyse_input, analyse_launch

V02 = Path("/work/shared/frameworks/torchtitan-v0.2-9810191bb-parent")
MIRROR = Path("/work/.mirror/pytorch+torchtitan/repo")
DEBUG = V02 / "torchtitan/models/llama3/train_configs/debug_model.toml"
needs_v02 = pytest.mark.skipif(not DEBUG.is_file(), reason="torchtitan v0.2 tree (../shared/frameworks) not present")


def line(*words):
    return parse_launch_args(["torchrun", "--nproc_per_node", "8", "-m", "torchtitan.train", *words])


def test_v02_launch_is_recognised_and_typed():
    got = line("--job.config_file", "c.toml", "--parallelism.tensor-parallel-degree=2", "--compile.enable",
               "--compile.components", "model,loss", "--training.local_batch_size", "4")
    assert (got.framework, got.config) == ("torchtitan-0.2", "c.toml")
    assert [(o.path, o.value) for o in got.overrides] == [
        ("parallelism.tensor_parallel_degree", 2), ("compile.enable", True), ("compile.components", ["model", "loss"]),
        ("training.local_batch_size", 4)]
    assert got.hints[0].world_size == 8
    assert line("--job.config-file=c.toml").config == "c.toml"


def test_v02_refusals_name_the_option():
    with pytest.raises(InputError, match="training has no field 'compile'"):
        line("--job.config_file", "c.toml", "--training.compile")
    with pytest.raises(InputError) as exc:
        line("--job.config_file", "c.toml", "--parallelism.tensor_paralel_degree", "2")
    assert exc.value.help == "did you mean --parallelism.tensor_parallel_degree?"
    with pytest.raises(InputError, match="not a whole number"):
        line("--job.config_file", "c.toml", "--parallelism.tensor_parallel_degree", "x")
    with pytest.raises(InputError, match="flag"):
        line("--job.config_file", "c.toml", "--compile.enable=true")


def test_custom_config_module_keeps_unknown_options():
    got = line("--job.config_file", "c.toml", "--job.custom_config_module", "my.ext", "--myext.knob", "3")
    assert [(o.path, o.value) for o in got.overrides][-1] == ("myext.knob", "3")


@needs_v02
def test_v02_command_line_is_checked_with_v02_semantics(rules):
    rep = analyse_launch(line("--job.config_file", str(DEBUG), "--parallelism.tensor_parallel_degree", "3"),
                         Options(rules=rules))
    rep = run_checks(rep, Options(rules=rules))
    assert rep.status == "checked" and rep.spec.framework["version"] == "0.2.x"
    assert rep.spec.degrees["tp"] == 3 and rep.topology.world_size == 8
    errors = [f for f in rep.findings if f.severity == "error"]
    assert errors and {f.file for f in errors if f.key and "tensor" in f.key} <= {"<command line>"}


@needs_v02
def test_synthetic_v02_script(tmp_path, rules):
    script = tmp_path / "train.slurm"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=2\nCONFIG_FILE={DEBUG}\nTP=2\n"
                      "srun torchrun --nnodes 2 --nproc_per_node 4 -m torchtitan.train --job.config_file $CONFIG_FILE \\\n"
                      "  --parallelism.tensor_parallel_degree $TP --parallelism.pipeline_parallel_degree $PP\n")
    options = Options(rules=rules)
    [rep] = [run_checks(r, options) for r in analyse_input(str(script), "script", options)]
    assert rep.status == "checked" and rep.topology.world_size == 8
    assert rep.spec.degrees["tp"] == 2 and rep.spec.degrees["pp"] is None       # $PP: unknown, never the TOML's
    assert "$PP" in rep.spec.unreadable[0]["reason"]
    assert rep.source.locate("parallelism.tensor_parallel_degree") == (6, 3)
    assert rep.source.file_of("parallelism.tensor_parallel_degree") == str(script)


def _mirror_tree(tmp_path) -> Path:
    out = tmp_path / "tt02"
    out.mkdir()
    (out / ".git").mkdir()
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "9810191bb^", "run_train.sh",
                              "multinode_trainer.slurm", "torchtitan/models/llama3/train_configs"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


@pytest.mark.skipif(not MIRROR.is_dir(), reason="torchtitan mirror not present")
def test_real_v02_scripts_from_the_mirror(tmp_path, rules):
    """run_train.sh and multinode_trainer.slurm of the TOML era: read with v0.2 semantics (not ML006 quoting
    main's manager.py), with their default configs and the world their torchrun lines give."""
    tree = _mirror_tree(tmp_path)
    fake, torchrun = read_launch_script(str(tree / "run_train.sh"))
    assert (fake.framework, fake.launcher, torchrun.framework, torchrun.launcher) == (
        "torchtitan-0.2", "python", "torchtitan-0.2", "torchrun")
    assert torchrun.config == "./torchtitan/models/llama3/train_configs/debug_model.toml"
    assert torchrun.hints[0].world_size == 8                                   # NGPU defaults to 8
    [slurm] = read_launch_script(str(tree / "multinode_trainer.slurm"))
    assert slurm.config.endswith("llama3_8b.toml") and slurm.hints[0].world_size == 32
    options = Options(rules=rules)
    for name in ("run_train.sh", "multinode_trainer.slurm"):
        reports = [run_checks(r, options) for r in analyse_input(str(tree / name), "script", options)]
        assert [r.status for r in reports] == ["checked"] * len(reports)
        assert not [f for r in reports for f in r.findings if f.severity == "error"]


_WORKER = r'''
import contextlib, io, json, logging, sys, types, warnings
logging.disable(logging.CRITICAL); warnings.simplefilter("ignore")
root, path = sys.argv[1:3]
sys.path.insert(0, root)
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [root + "/torchtitan"]; sys.modules["torchtitan"] = pkg
from torchtitan.config.manager import ConfigManager
out = []
for cli, keys in json.load(sys.stdin):
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            c = ConfigManager().parse_args(["--job.config_file", path, *cli])
    except SystemExit:
        out.append(None); continue
    vals = {}
    for k in keys:
        v = c
        for p in k.split("."): v = getattr(v, p)
        vals[k] = list(v) if isinstance(v, (list, tuple)) else v
    out.append(vals)
print(json.dumps(out))
'''

PARITY = [
    ["--parallelism.tensor_parallel_degree", "2"],
    ["--parallelism.tensor-parallel-degree=4"],
    ["--parallelism.tensor_parallel_degree", "x"],
    ["--parallelism.tensor_parallel_degree"],
    ["--compile.enable"],
    ["--compile.no-enable"],
    ["--compile.enable=true"],
    ["--compile.components", "model,loss"],
    ["--training.compile"],
    ["--training.local_batch_size", "4", "--training.seq_len=1024"],
    ["--training.mixed_precision_param", "float32"],
    ["--training.mixed_precision_param", "float16"],
    ["--parallelism.pipeline_parallel_layers_per_stage", "None"],
    ["--optimizer.lr", "3e-4"],
    ["--model.flavor", "debugmodel"],
    ["--parallelism.data_parallel_shard_degree", "-1"],
    ["--activation_checkpoint.mode", "full"],
    ["--nosection.x", "1"],
]


@needs_v02
def test_parity_with_v02_config_manager():
    pytest.importorskip("tyro")
    jobs = []
    for cli in PARITY:
        try:
            keys = [o.path for o in line("--job.config_file", "c.toml", *cli).overrides]
        except InputError:
            keys = []
        jobs.append((cli, keys))
    proc = subprocess.run([sys.executable, "-c", _WORKER, str(V02), str(DEBUG)], input=json.dumps(jobs),
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if proc.returncode != 0:
        pytest.skip(f"torchtitan v0.2 cannot run here: {proc.stderr[-300:]}")
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    for (cli, _), got in zip(jobs, theirs):
        try:
            ours = {o.path: o.value for o in line("--job.config_file", "c.toml", *cli).overrides}
        except InputError:
            ours = None
        assert (ours is None) == (got is None), (cli, ours, got)
        if ours is not None:
            assert ours == got, cli
    assert sum(t is None for t in theirs) >= 5
