"""KempnerForge launch lines and scripts (meshlint/inputs/kf_launch.py, toml_launch.py, shellflow.py): every
launcher form, the override parser's semantics confirmed by KempnerForge's own loader, the real scripts
and README lines of KempnerForge 5666d0d, variables, functions, missing configs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from meshlint.engine.check import Options, run_checks
from meshlint.errors import InputError
from meshlint.inputs.launch import parse_launch_args
from meshlint.inputs.scripts import launches_in_text
from meshlint.engine.units import analyse_input, analyse_launch

KF = Path("/work/shared/frameworks/KempnerForge-5666d0d")
KF_MIRROR = Path("/work/.mirror/KempnerInstitute+KempnerForge/repo")
needs_kf = pytest.mark.skipif(not (KF / "kempnerforge" / "config" / "loader.py").is_file(),
                              reason="KempnerForge 5666d0d (../shared/frameworks) not present")
DEBUG = str(KF / "configs" / "train" / "debug.toml")


def launch(line: str):
    return parse_launch_args(line.split())


def report_of(line: str, rules):
    return run_checks(analyse_launch(launch(line), Options(rules=rules)), Options(rules=rules))


# KempnerForge's measured runs were on H200s: "4x NVIDIA H200 (141 GB) per node" (benchmarks/mfu_scaling/
# mfu_scaling.md:5, moe_packed/moe_packed_benchmark.md:5), so their memory is judged against 141 GB, not the
# 80 GiB meshlint assumes when nothing states the GPU.
KF_GPU_GIB = 141e9 / 2 ** 30


def script_reports(path: Path, rules) -> list:
    options = Options(rules=rules, gpu_memory_gib=KF_GPU_GIB, gpu_memory_source="KempnerForge's benchmark pages")
    return [run_checks(r, options) for r in analyse_input(str(path), "script", options)]


def world(report):
    return report.topology.world_size if report.topology else None


# ----------------------------------------------------------------------------- launcher forms

@pytest.mark.parametrize("line, launcher, world_size", [
    ("torchrun --nproc_per_node=2 scripts/train.py c.toml --distributed.tp=2", "torchrun", 2),
    ("torchrun --nnodes 2 --nproc-per-node 4 scripts/train.py c.toml", "torchrun", 8),
    ("uv run torchrun --nproc_per_node=4 scripts/train.py c.toml", "torchrun", 4),
    ("python -m torch.distributed.run --nproc_per_node 4 scripts/train.py c.toml", "torchrun", 4),
    ("uv run python scripts/train.py c.toml", "python", 1),
    ("python3 scripts/train.py c.toml --train.max_steps=5", "python", 1),
    ("srun --nodes=2 --ntasks=8 --gpus-per-node=4 uv run python scripts/train.py c.toml", "srun python", 8),
    ("srun -N 2 --ntasks-per-node=4 python scripts/train.py c.toml", "srun python", 8),
    ("WORLD_SIZE=3 python scripts/train.py c.toml", "python", 3),
    ("python train.py my.toml", "python", 1),
])
def test_launcher_forms(line, launcher, world_size):
    got = launch(line)
    assert got.framework == "kempnerforge" and got.launcher == launcher
    assert got.config.endswith(".toml")
    assert [h.world_size for h in got.hints if h.world_size][:1] == [world_size]


def test_not_a_kempnerforge_launch():
    with pytest.raises(InputError, match="starts no training meshlint reads"):
        launch("python train.py --lr 3")          # a bare train.py without a TOML is some other project's
    with pytest.raises(InputError, match="needs a config"):
        launch("torchrun --nproc_per_node 2 scripts/train.py")


def test_override_parser_semantics():
    """loader.py:250-285: literal_eval or the string; no '=' is the string "true"; words without -- skipped."""
    got = launch("python scripts/train.py c.toml --distributed.tp=4 --optimizer.lr=3e-4 --optimizer.betas=(0.9,0.95) "
                 "--data.file_pattern=tokenized_*.bin --train.compile_model --distributed.pp 2 stray "
                 "--distributed.tp=True --model.x=None").overrides
    assert [(o.path, o.value if o.known else "?", o.kind) for o in got] == [
        ("distributed.tp", 4, "value"), ("optimizer.lr", 3e-4, "value"), ("optimizer.betas", [0.9, 0.95], "value"),
        ("data.file_pattern", "tokenized_*.bin", "value"), ("train.compile_model", "true", "flag"),
        ("distributed.pp", "true", "space"), ("distributed.tp", True, "value"), ("model.x", "?", "value")]
    assert got[5].dropped == "2" and got[5].text == "--distributed.pp 2"
    assert "None" in got[7].value.reason
    notes = launch("python scripts/train.py c.toml --train.max_steps=5 stray").notes
    assert any("'stray'" in n and "skips it" in n for n in notes)


def test_parser_crashes_are_refusals():
    with pytest.raises(InputError, match="earlier override gave a value"):
        launch("python scripts/train.py c.toml --distributed.tp=4 --distributed.tp.x=1")
    with pytest.raises(InputError, match="not a --section.key"):
        launch("python scripts/train.py c.toml --=4")
    with pytest.raises(InputError, match="ML007|deep"):
        launch("python scripts/train.py c.toml --model.x=" + "[" * 80 + "]" * 80)


# ----------------------------------------------------------------------------- checked as it runs

@needs_kf
def test_command_line_after_double_dash_is_checked():
    code, out = run_cli("check", "--no-cache", "--", "torchrun", "--nproc_per_node=2", "scripts/train.py", DEBUG,
                        "--distributed.tp=2")
    assert code == 0 and "starts no training" not in out and "1 file checked" in out


@needs_kf
def test_space_form_is_refused_at_the_word(rules):
    """KempnerForge's own verdict on ``--distributed.tp 4`` is ValueError int('true') (not tp = True):
    ML317, at the option's word on the command line."""
    rep = report_of(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --distributed.tp 4", rules)
    [f] = [f for f in rep.findings if f.code == "ML317"]
    assert f.file == "<command line>" and f.col == len(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} ") + 1
    assert "int() with base 10: 'true'" in f.message
    rep = report_of(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --train.compile_model false", rules)
    assert [f.code for f in rep.findings] == ["ML318"]
    assert rep.source.data["train"]["compile_model"] is True      # what runs


@needs_kf
def test_overrides_replace_the_toml_and_point_at_the_script(tmp_path, rules):
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\nTP=3\nuv run torchrun --nproc_per_node=4 scripts/train.py {DEBUG} \\\n"
                      "    --distributed.tp=$TP --train.max_steps=5\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "checked" and world(rep) == 4
    assert rep.source.data["distributed"]["tp"] == 3
    where = {f.code: (f.file, f.line, f.col) for f in rep.findings if f.severity == "error"}
    assert where["ML304"] == (str(script), 4, 5)                     # tp: the override's word
    assert where["ML104"][0] == DEBUG                                 # dp_shard = -1: the TOML's line
    assert rep.path == f"{script}:3::{DEBUG}"


@needs_kf
def test_unknown_variable_is_named_never_guessed(tmp_path, rules):
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --distributed.tp=$TP\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "checked"
    assert rep.spec.degrees["tp"] is None and [u["key"] for u in rep.spec.unreadable] == ["distributed.tp"]
    assert "$TP" in rep.spec.unreadable[0]["reason"]
    assert not [f for f in rep.findings if f.severity == "error"]
    assert any("meshlint cannot see" in n for n in rep.resolution.notes)


@needs_kf
def test_config_from_the_scripts_argument_is_a_skip_with_a_note(tmp_path, rules):
    script = tmp_path / "run.sh"
    script.write_text('CONFIG="${1:?usage}"\nsrun python scripts/train.py "$CONFIG" "$@"\n')
    [rep] = script_reports(script, rules)
    assert rep.status == "skipped" and "$1 is an argument of the script" in rep.note


def test_missing_config_says_which_paths_were_tried(tmp_path, rules):
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "scripts"
    sub.mkdir()
    script = sub / "run.sh"
    script.write_text("torchrun --nproc_per_node=2 scripts/train.py configs/nope.toml\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "error" and rep.error.code == "ML001"
    assert str(sub / "configs/nope.toml") in rep.error.message and str(tmp_path / "configs/nope.toml") in rep.error.message
    assert (rep.error.line, rep.error.col) == (1, 46)


def test_config_relative_to_the_repository_root(tmp_path, rules):
    (tmp_path / ".git").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "c.toml").write_text("[distributed]\ntp = 2\n")
    (tmp_path / "bench").mkdir()
    script = tmp_path / "bench" / "b.sh"
    script.write_text("torchrun --nproc_per_node=4 scripts/train.py configs/c.toml --distributed.dp_shard=2\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "checked" and rep.source.file == str(tmp_path / "configs" / "c.toml")
    assert rep.resolution.degrees["dp_shard"] == 2 and not rep.findings


# ----------------------------------------------------------------------------- shell: functions, branches, patterns

BENCH = r'''
M="--model.dim=512 --model.n_heads=8"
run() {
    local name="$1"
    local mode="$2"
    local args="$3"
    if [[ "$mode" == torchrun:* ]]; then
        local nproc="${mode#torchrun:}"
        torchrun --nproc_per_node="$nproc" scripts/train.py c.toml $args
    elif [[ "$mode" == srun:* ]]; then
        local rest="${mode#srun:}"
        srun --nodes="${rest%%:*}" --ntasks="${rest#*:}" python scripts/train.py c.toml $args
    fi
}
run a "torchrun:2" "$M --distributed.tp=2"
run b "srun:2:8" "$M --distributed.tp=4"
'''


def test_function_calls_and_decided_branches():
    a, b = launches_in_text(BENCH, file="bench.sh")
    assert (a.launcher, a.line, [h.world_size for h in a.hints]) == ("torchrun", 15, [2])
    assert (b.launcher, b.line, b.hints[0].world_size, b.hints[0].nodes) == ("srun python", 16, 8, 2)
    tp = [o for o in a.overrides if o.path == "distributed.tp"][0]
    assert (tp.value, tp.position[1:]) == (2, (15, 24))            # the call's own text
    dim = [o for o in b.overrides if o.path == "model.dim"][0]
    assert dim.position[1:] == (2, 4)                                # where $M was set
    assert "launched by run() (line 9), called on line 15" in a.notes[0]


def test_undecidable_branch_keeps_both_and_locals_are_undone():
    text = ('f() {\n  local X=1\n  if [ "$UNSET" = 1 ]; then\n    torchrun scripts/train.py c.toml\n  else\n'
            '    python scripts/train.py c.toml\n  fi\n}\nf\necho $X\n')
    launches = launches_in_text(text)
    assert [x.launcher for x in launches] == ["torchrun", "python"]


def test_pattern_operators_and_shift():
    text = ('V=a:b:c\nf() { shift; python scripts/train.py "$1" --train.seed=${V#*:} --train.x="${V%%:*}"; }\n'
            'f skip c.toml\n')
    [got] = launches_in_text(text)
    assert got.config == "c.toml"
    assert [(o.path, o.value) for o in got.overrides] == [("train.seed", "b:c"), ("train.x", "a")]


def test_function_recursion_is_bounded():
    with pytest.raises(InputError) as exc:
        launches_in_text("f() { f; }\nf\n")
    assert exc.value.code == "ML007"


def test_a_script_launching_neither_framework_is_skipped(tmp_path, rules):
    script = tmp_path / "tools.sh"
    script.write_text("#!/bin/bash\npython scripts/eval.py --x 1\necho train.py\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "skipped" and "KempnerForge" in rep.note


# ----------------------------------------------------------------------------- KempnerForge's own scripts

MFU_WORLDS = [1, 2, 2, 4, 4, 4, 8, 8, 8, 16, 16, 32, 32, 32]   # run_experiment's torchrun:N / srun:NODES:NTASKS


@needs_kf
def test_mfu_bench_every_line_as_it_ran(rules):
    """benchmarks/mfu_scaling/mfu_bench.sh: 14 run_experiment calls, each its own launch with the world
    it really used, and no finding (every line of it ran)."""
    reports = script_reports(KF / "benchmarks/mfu_scaling/mfu_bench.sh", rules)
    assert [r.status for r in reports] == ["checked"] * 14
    assert [world(r) for r in reports] == MFU_WORLDS
    # the one value the script leaves to the environment (DATA="${DATA:?...}" in --data.dataset_path=$DATA) is
    # said as unreadable (ML111, info), nothing else
    assert [[f.code for f in r.findings] for r in reports] == [["ML111"]] * 14
    assert all("data.dataset_path" in r.findings[0].message for r in reports)
    tp = [r.resolution.degrees["tp"] for r in reports]
    assert tp == [1, 1, 2, 1, 4, 2, 4, 1, 4, 4, 4, 4, 4, 4]
    assert reports[13].source.data["model"]["dim"] == 8192           # $M70B
    assert all(r.resolution.framework_error is None for r in reports)


@needs_kf
def test_kempnerforge_scripts_read_without_false_alarms(rules):
    scripts = sorted((KF / "scripts" / "slurm").glob("*.sh")) + sorted((KF / "benchmarks").glob("*/*.sh"))
    assert len(scripts) == 12
    reports = [r for s in scripts for r in script_reports(s, rules)]
    assert not [r for r in reports if r.status == "error"]
    assert not [f for r in reports for f in r.findings if f.severity == "error"]
    by_file = {}
    for r in reports:
        by_file.setdefault(r.path.split(":")[0].rsplit("/", 1)[-1], []).append(r)
    assert [world(r) for r in by_file["13b_validation.sh"]] == [24]          # #SBATCH 6 nodes x 4 tasks
    assert [world(r) for r in by_file["7b_requeue.sh"]] == [16]
    assert [r.status for r in by_file["multinode.sh"]] == ["skipped"]        # its config is "$1"


def _doc_lines(path: str) -> list:
    """The launch lines (continuations joined) of one Markdown file of KempnerForge 5666d0d."""
    text = subprocess.run(["git", "-C", str(KF_MIRROR), "show", f"5666d0d:{path}"], capture_output=True,
                          text=True).stdout
    lines, cur = [], ""
    for raw in text.splitlines():
        cur = (cur + " " + raw.strip().rstrip("\\")) if cur else raw.strip().rstrip("\\")
        if raw.rstrip().endswith("\\"):
            continue
        if "scripts/train.py" in cur and cur.startswith(("uv ", "torchrun", "python", "srun")):
            lines.append(cur.strip())
        cur = ""
    return lines


def _verdict(line: str, rules) -> tuple:
    import shlex

    options = Options(rules=rules, gpu_memory_gib=KF_GPU_GIB, gpu_memory_source="KempnerForge's benchmark pages")
    rep = run_checks(analyse_launch(parse_launch_args(shlex.split(line.split(" #")[0])), options), options)
    return rep.status, sorted({f.code for f in rep.findings if f.severity == "error"})


@needs_kf
@pytest.mark.skipif(not KF_MIRROR.is_dir(), reason="KempnerForge mirror not present")
def test_readme_and_docs_launch_lines(rules, monkeypatch):
    """Every launch line of KempnerForge's README (8) and docs (49 in all), run from its root: the README's
    are clean; in the docs, the lines naming a placeholder config are missing files (ML001), and the two
    that KempnerForge itself refuses are errors (its loader agrees: test_verdicts_agree_with_kempnerforges_loader)."""
    monkeypatch.chdir(KF)
    readme = _doc_lines("README.md")
    assert len(readme) == 8
    assert [_verdict(line, rules) for line in readme] == [("checked", [])] * 8
    files = subprocess.run(["git", "-C", str(KF_MIRROR), "ls-tree", "-r", "--name-only", "5666d0d"],
                           capture_output=True, text=True).stdout.split()
    lines = [line for f in files if f.endswith(".md") for line in _doc_lines(f)]
    verdicts = [_verdict(line, rules) for line in lines]
    assert len(lines) == 49
    bad = {line: v for line, v in zip(lines, verdicts) if v != ("checked", [])}
    assert sorted(v for v in bad.values()) == [("checked", ["ML104"]), ("checked", ["ML112"]), ("checked", ["ML112"]),
                                               ("error", []), ("error", []), ("error", [])]
    assert all("<" in line or "your_mix" in line or "${CONFIG}" in line for line, v in bad.items() if v[0] == "error")
    assert all("--checkpoint.interval=0" in line for line, v in bad.items() if v[1] == ["ML112"])
    assert all("--distributed.tp=2" in line for line, v in bad.items() if v[1] == ["ML104"])


# ----------------------------------------------------------------------------- KempnerForge's own verdicts

VERDICTS = [  # (configs/train file, nproc, overrides)
    ("debug.toml", 2, ["--distributed.tp=2"]),
    ("debug.toml", 2, ["--distributed.tp", "2"]),
    ("debug.toml", 4, ["--distributed.tpp=2"]),
    ("debug.toml", 4, ["--distributed.dp_shard=3"]),
    ("debug.toml", 1, ["--distributed.tp=True"]),
    ("debug.toml", 4, ["--distributed.tp=4.0"]),
    ("debug.toml", 2, ["--distributed.pp_schedule=GPipe"]),
    ("debug.toml", 2, ["--distributed.pp_schedule=gpipe"]),
    ("debug.toml", 2, ["--train.compile_model", "false"]),
    ("debug.toml", 4, ['--distributed.tp="4"']),
    ("debug.toml", 4, ["--distributed.tp=3"]),
    ("debug.toml", 2, ["--optimizer.betas=(0.9,0.95)", "--optimizer.lr=1e-4"]),
    ("debug.toml", 2, ["--model.n_heads=7"]),
    ("debug.toml", 2, ["--train.compile_model=maybe"]),
    ("7b.toml", 8, ["--distributed.tp=4", "--distributed.dp_shard=-1"]),
    ("7b.toml", 8, ["--distributed.tp=4", "--distributed.tp=2"]),
    ("7b.toml", 6, ["--distributed.tp=4"]),
    ("debug.toml", 1, ["--model.dim=512", "--optimizer.betas=[0.9,0.95]", "--distributed.tp=2"]),  # docs' example
    ("debug.toml", 1, ["--train.max_steps=20", "--checkpoint.interval=0"]),                      # smoke-test skill
]

_WORKER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from kempnerforge.config.loader import load_config
out = []
for path, world, cli in json.load(sys.stdin):
    try:
        load_config(path, cli_args=cli).validate(world)
        out.append(None)
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {exc}"[:200])
print(json.dumps(out))
'''


@needs_kf
def test_verdicts_agree_with_kempnerforges_loader(rules):
    jobs = [(str(KF / "configs" / "train" / f), n, cli) for f, n, cli in VERDICTS]
    proc = subprocess.run([sys.executable, "-c", _WORKER, str(KF)], input=json.dumps(jobs), capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if proc.returncode != 0:
        pytest.skip(f"KempnerForge's loader cannot run here: {proc.stderr[-300:]}")
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    for (path, n, cli), error in zip(jobs, theirs):
        rep = run_checks(analyse_launch(parse_launch_args(
            ["torchrun", f"--nproc_per_node={n}", "scripts/train.py", path, *cli]), Options(rules=rules)),
            Options(rules=rules))
        refused = rep.status == "error" or any(f.severity == "error" for f in rep.findings)
        assert refused == (error is not None), (cli, n, error, [(f.code, f.message) for f in rep.findings])
    assert sum(e is not None for e in theirs) >= 7


def test_a_bare_train_py_with_another_projects_toml_is_skipped(tmp_path, rules):
    (tmp_path / "my.toml").write_text("[optim]\nlr = 3\n")
    script = tmp_path / "run.sh"
    script.write_text("python train.py my.toml --optim.lr=4\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "skipped" and "not a KempnerForge config" in rep.note


@needs_kf
def test_space_form_in_a_script_points_at_its_word(tmp_path, rules):
    script = tmp_path / "run.sh"
    script.write_text(f"ARGS='--train.max_steps=5 --distributed.tp 4'\n"
                      f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} $ARGS\n")
    [rep] = script_reports(script, rules)
    [f] = [f for f in rep.findings if f.code == "ML317"]
    assert (f.file, f.line, f.col) == (str(script), 1, 27)
    assert "tp" not in rep.source.data["distributed"] or rep.source.data["distributed"]["tp"] != "true"


@pytest.mark.parametrize("text, world_size, gpn, nodes", [
    ("#SBATCH -N 2\n#SBATCH --ntasks-per-node=4\nsrun uv run python scripts/train.py c.toml\n", 8, 4, 2),
    ("#SBATCH --nodes=3\n#SBATCH --gpus-per-node=4\n"
     "srun torchrun --nnodes=$SLURM_NNODES --nproc_per_node=4 scripts/train.py c.toml\n", 12, 4, 3),
    ("#SBATCH --nodes=2\nsrun --ntasks=8 --gpus-per-node=4 python scripts/train.py c.toml\n", 8, 4, 2),
])
def test_slurm_shapes(text, world_size, gpn, nodes):
    [got] = launches_in_text(text, file="job.sbatch")
    hint = next(h for h in got.hints if h.world_size)
    assert (hint.world_size, hint.gpus_per_node, hint.nodes) == (world_size, gpn, nodes)


def test_shift_in_a_loop_makes_the_arguments_unknown():
    """torchtitan's run_moe_tests.sh splits its arguments at '--' with a while/shift loop: the loop is not
    followed, so the arguments after it are unknown (passed on unseen), never a wrong split."""
    text = ('pair() {\n  local a=()\n  while [ "$1" != "--" ]; do a+=("$1"); shift; done\n  shift\n'
            '  python scripts/train.py c.toml "${a[@]}" "$@"\n}\npair --train.seed=1 -- --train.seed=2\n')
    [got] = launches_in_text(text)
    assert got.overrides == [] and any("cannot see" in n for n in got.notes)


@needs_kf
def test_a_later_known_value_replaces_an_unknown_one(tmp_path, rules):
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --distributed.tp=$TP --distributed.tp=2\n")
    [rep] = script_reports(script, rules)
    assert rep.spec.degrees["tp"] == 2 and rep.spec.unreadable == [] and rep.topology.world_size == 4


@needs_kf
def test_unknown_override_is_an_ml111_note_naming_the_variable(tmp_path, rules):
    script = tmp_path / "run.sh"
    script.write_text(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --distributed.tp=$TP\n")
    [rep] = script_reports(script, rules)
    [f] = [f for f in rep.findings if f.code == "ML111"]
    assert "$TP is not set in the script" in f.message and (f.file, f.line) == (str(script), 1)
    assert f.help.startswith("set the variable in the script")


def test_an_unreadable_config_is_named_at_the_launch(tmp_path, rules):
    (tmp_path / "bad.toml").write_text("[distributed\ntp = 2\n")
    script = tmp_path / "run.sh"
    script.write_text("\ntorchrun --nproc_per_node=2 scripts/train.py bad.toml\n")
    [rep] = script_reports(script, rules)
    assert rep.status == "error" and str(tmp_path / "bad.toml") + ":1:" in rep.error.message
    assert (rep.error.line, rep.error.col) == (2, 46)


def test_a_value_set_in_a_decided_branch_holds_after_it():
    text = ('MODE=big\nif [ "$MODE" = big ]; then\n  TP=8\nelse\n  TP=4\nfi\n'
            'if [ "$UNSET" = x ]; then PP=2; fi\n'
            'torchrun --nproc_per_node=8 scripts/train.py c.toml --distributed.tp=$TP --distributed.pp=$PP\n')
    [got] = launches_in_text(text)
    tp, pp = got.overrides
    assert (tp.path, tp.value) == ("distributed.tp", 8)
    assert not pp.known and "inside an if/loop block" in pp.value.reason


# ----------------------------------------------------------------------------- kf_native cases b07, b08, b17, b19-b21

@needs_kf
def test_cp_ranks_outside_the_mesh_are_an_error_and_the_flat_fallback_a_warning(rules):
    """KempnerForge's own code on gloo (cases kf_native/b08): with cp = 2 on 4 ranks the mesh ('dp_shard',) (2,)
    leaves ranks 2-3 without a coordinate and they die in build_parallel_model (fully_shard: IndexError; with tp = 2,
    tensor parallelism: RuntimeError); on 2 ranks every other degree is 1, the mesh is a flat dp_shard of both and the
    run trains."""
    for extra, mesh in (("", '("dp_shard",) (2,)'), (" --distributed.tp=2", '("dp_shard", "tp") (1, 2)')):
        rep = report_of(f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --distributed.cp=2{extra}", rules)
        [f] = [f for f in rep.findings if f.code in ("ML301", "ML321")]
        assert (f.code, f.severity, f.file) == ("ML321", "error", "<command line>")
        assert f"ranks 2-3 (2 of 4) outside the DeviceMesh" in f.message and mesh in f.message
        assert "IndexError" in f.message and "RuntimeError" in f.message
    rep = report_of(f"torchrun --nproc_per_node=2 scripts/train.py {DEBUG} --distributed.cp=2", rules)
    [f] = [f for f in rep.findings if f.code in ("ML301", "ML321")]
    assert (f.code, f.severity) == ("ML301", "warning") and "silently become FSDP ranks" in f.message


@needs_kf
def test_a_misspelt_section_in_an_override_points_at_its_word(tmp_path, rules):
    """kf_native/b20: ``--distrbuted.dp_shard=3`` makes a top-level key no TOML line holds: the finding is at the
    override's word (as an unknown key one level down already was), not at line 1 of the TOML."""
    line = f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --train.max_steps=50 --distrbuted.dp_shard=3"
    rep = report_of(line, rules)
    [f] = [f for f in rep.findings if f.code == "ML108"]
    assert "'distrbuted' in [top level]" in f.message
    assert (f.file, f.line, f.col) == ("<command line>", 1, line.index("--distrbuted") + 1)
    script = tmp_path / "run.sh"
    script.write_text(f"OVERRIDES='--distrbuted.tp=2'\ntorchrun --nproc_per_node=4 scripts/train.py {DEBUG} $OVERRIDES\n")
    [rep] = script_reports(script, rules)
    [f] = [f for f in rep.findings if f.code == "ML108"]
    assert (f.file, f.line, f.col) == (str(script), 1, 12)


@needs_kf
def test_pp_larger_than_the_layers_offers_only_keys_kempnerforge_has(rules):
    """kf_native/b07: KempnerForge refuses pipeline_parallel_layers_per_stage (Unknown config keys in
    DistributedConfig): ML601's help names pp only (torchtitan keeps the key, tested with its fixtures)."""
    rep = report_of(f"torchrun --nproc_per_node=8 scripts/train.py {DEBUG} --distributed.pp=8 "
                    "--train.grad_accum_steps=8", rules)
    [f] = [f for f in rep.findings if f.code == "ML601"]
    assert "pipeline_parallel_layers_per_stage" not in f.help and "pp in 2, 4" in f.help


def test_ml601_help_keeps_layers_per_stage_for_torchtitan(write, rules):
    path = write("[model]\nname = \"llama3\"\nflavor = \"debugmodel\"\n[parallelism]\npipeline_parallel_degree = 16\n",
                 "tt_16gpu.toml")
    from meshlint.engine.check import check_file

    rep = check_file(str(path), Options(rules=rules))
    helps = [f.help for f in rep.findings if f.code == "ML601"]
    assert helps and all("pipeline_parallel_layers_per_stage" in h for h in helps)


@needs_kf
def test_overrides_without_dashes_are_skipped_with_a_warning_at_each_word(rules):
    """kf_native/b19: ``_parse_cli_overrides`` skips every word that does not start with '--' (loader.py:261-262):
    one ML322 per ``section.key=value`` word, at its column, saying what the run keeps."""
    head = f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} "
    line = head + "train.max_steps=50 +distributed.tp=2 stray --train.seed=3 foo.bar=1"
    rep = report_of(line, rules)
    got = [(f.col, f.severity, f.help) for f in rep.findings if f.code == "ML322"]
    assert got == [(line.index("train.max_steps=50") + 1, "warning", "write --train.max_steps=50"),
                   (line.index("+distributed.tp=2") + 1, "warning", "write --distributed.tp=2"),
                   (line.index("foo.bar=1") + 1, "warning", "write --foo.bar=1")]
    messages = [f.message for f in rep.findings if f.code == "ML322"]
    assert "the run keeps distributed.tp = 1, not 2" in messages[1]
    assert "KempnerForge has no key foo.bar" in messages[2]
    assert rep.source.data["train"]["seed"] == 3 and "tp" not in rep.source.data["distributed"]


def test_overrides_without_dashes_in_a_configs_comments():
    from meshlint.frameworks.kempnerforge.v5666d0d import dashless_overrides

    comments = [(1, 1, " torchrun --nproc_per_node=4 scripts/train.py c.toml train.max_steps=50 \\"),
                (2, 1, "     distributed.tp=2  # expect: a.b=1"),
                (3, 1, " set distributed.tp=2 on big nodes"),
                (4, 1, " python scripts/train.py --x=1 data.path=/d"),   # no .toml after train.py: not a launch
                (5, 3, " uv run python scripts/train.py c.toml ++model.dim=64")]
    found = [(i["line"], i["col"], i["key"], i["value"], i["kept"])
             for i in dashless_overrides(comments, {"train": {"max_steps": 500}})]
    assert found == [(1, 55, "train.max_steps", "50", "500"), (2, 7, "distributed.tp", "2", "1"),
                     (5, 43, "model.dim", "64", "4096")]


@needs_kf
def test_two_space_form_overrides_on_one_line_point_at_their_own_words(rules):
    line = f"torchrun --nproc_per_node=4 scripts/train.py {DEBUG} --train.compile_model false --metrics.enable_wandb no"
    rep = report_of(line, rules)
    cols = [f.col for f in rep.findings if f.code == "ML318"]
    assert cols == [line.index("--train.compile_model") + 1, line.index("--metrics.enable_wandb") + 1]


@pytest.mark.parametrize("text, world_size, gpn, nodes", [
    # srun starts one task per node where nothing names a task count (SLURM's default): kf_native/b21
    ("#SBATCH --nodes=3\n#SBATCH --gpus-per-node=4\nsrun --kill-on-bad-exit=1 uv run python scripts/train.py c.toml\n",
     3, 1, 3),
    ("srun --nodes=3 --gpus-per-node=4 python scripts/train.py c.toml\n", 3, 1, 3),
    ("#SBATCH -N 2\nsrun python -m torchtitan.train --module m --config c\n", 2, 1, 2),
])
def test_srun_without_a_task_count_starts_one_task_per_node(text, world_size, gpn, nodes):
    [got] = launches_in_text(text, file="job.sbatch")
    hint = next(h for h in got.hints if h.world_size)
    assert (hint.world_size, hint.gpus_per_node, hint.nodes) == (world_size, gpn, nodes)
    assert "one task per node (SLURM's default)" in hint.source
    assert any("SLURM starts one task per node by default" in n for n in got.notes)


@pytest.mark.parametrize("text", [
    "#SBATCH --nodes=3\n#SBATCH --cpus-per-task=16\nsrun python scripts/train.py c.toml\n",   # -c changes the default
    "#SBATCH --nodes=3\nexport SLURM_NTASKS_PER_NODE=4\nsrun python scripts/train.py c.toml\n",  # srun reads it
    "srun --gpus-per-task=1 --nodes=3 python scripts/train.py c.toml\n",
    "srun --ntasks=$N --nodes=3 python scripts/train.py c.toml\n",                             # given, unknown
    "srun python scripts/train.py c.toml\n",                                                  # nodes unknown
])
def test_srun_default_only_where_nothing_sets_the_tasks(text):
    [got] = launches_in_text(text, file="job.sbatch")
    assert not any(h.world_size for h in got.hints)
    assert not any("one task per node by default" in n for n in got.notes)


def test_torchrun_under_srun_keeps_its_own_world():
    [got] = launches_in_text("#SBATCH --nodes=3\n#SBATCH --gpus-per-node=4\n"
                             "srun torchrun --nnodes=3 --nproc_per_node=4 scripts/train.py c.toml\n", file="job.sbatch")
    hint = next(h for h in got.hints if h.world_size)
    assert (hint.world_size, hint.gpus_per_node) == (12, 4)
    assert not any("one task per node" in n for n in got.notes)


@needs_kf
def test_srun_default_world_refuses_a_config_for_twelve(tmp_path, rules):
    """kf_native/b21: KempnerForge takes the world from SLURM_NTASKS = 3 and refuses 1 × 3 × 4 = 12."""
    config = tmp_path / "c_12gpu.toml"
    config.write_text("[model]\nn_layers = 4\nn_heads = 8\nn_kv_heads = 8\ndim = 256\n[distributed]\ndp_shard = 3\ntp = 4\n")
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=3\n#SBATCH --gpus-per-node=4\nsrun python scripts/train.py {config}\n")
    [rep] = script_reports(script, rules)
    [f] = [f for f in rep.findings if f.code == "ML103"]
    assert f.severity == "error" and "= 12, but the world size is 3" in f.message
    assert "one task per node (SLURM's default)" in f.message
    # one cause, said once: the fix in ML103's help, no ML106 per source and no ML201 for tp 4 on "1 GPU per node"
    assert "add --ntasks-per-node=4" in f.help and "12 ranks as the config needs" in f.help
    assert 'file name "c_12gpu.toml"' in f.help and "no dp_shard fits" not in f.help
    assert {x.code for x in rep.findings if x.severity in ("error", "warning")} == {"ML103"}


KF_16 = "[model]\nn_layers = 4\nn_heads = 8\nn_kv_heads = 8\ndim = 256\n[distributed]\ndp_shard = -1\ntp = {tp}\n"


def _srun_job(tmp_path, header: str, name: str = "c_16gpu.toml", tp: int = 1):
    config = tmp_path / name
    config.write_text(KF_16.format(tp=tp))
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\n{header}srun --kill-on-bad-exit=1 uv run python scripts/train.py {config}\n")
    return script


@needs_kf
def test_srun_leaving_gpus_idle_is_one_warning_at_srun(tmp_path, rules):
    """kf_native/b11: --ntasks-per-node=1 on 4-GPU nodes, dp_shard = -1: the job runs on 4 of 16 GPUs."""
    script = _srun_job(tmp_path, "#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=4\n", tp=2)
    [rep] = script_reports(script, rules)
    shown = [f for f in rep.findings if f.severity in ("error", "warning")]
    assert [f.code for f in shown] == ["ML209"]   # no ML106 x6, no ML201 (tp 2 fits a 4-GPU node)
    [f] = shown
    assert f.file.endswith("job.sbatch") and f.line == 5 and f.col == 1
    assert "4 ranks, 12 of the 16 GPUs idle" in f.message and 'file name "c_16gpu.toml"' in f.message
    assert "--ntasks-per-node=4" in f.help and "SLURM_LOCALID" in f.help


@needs_kf
def test_a_source_that_disagrees_for_another_reason_is_still_reported(tmp_path, rules):
    script = _srun_job(tmp_path, "#SBATCH --nodes=4\n#SBATCH --gpus-per-node=4\n", name="c_32gpu.toml", tp=8)
    [rep] = script_reports(script, rules)
    codes = [f.code for f in rep.findings if f.severity in ("error", "warning")]
    assert "ML209" in codes and "ML106" in codes    # 32 is not the 16 GPUs of the allocation
    assert "ML201" in codes                         # tp 8 is larger than the node's 4 GPUs as well


@needs_kf
def test_one_task_per_gpu_is_not_reported(tmp_path, rules):
    script = _srun_job(tmp_path, "#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n")
    [rep] = script_reports(script, rules)
    assert not [f for f in rep.findings if f.code in ("ML209", "ML106", "ML103")]


def test_an_unknown_option_value_is_shown_once():
    """kf_native/b17: srun --nodes="$NNODES" is shown as written, not as --nodes=--nodes="$NNODES"."""
    [got] = launches_in_text('srun --nodes="$NNODES" --ntasks-per-node=4 --gpus-per-node=4 torchrun '
                             '--nnodes=$NNODES --nproc_per_node=4 scripts/train.py c.toml\n', file="job.sh")
    sources = " ".join(h.source for h in got.hints)
    assert '--nodes="$NNODES" --ntasks-per-node=4' in sources and "--nodes=--nodes" not in sources
    assert "--nnodes --nnodes" not in sources
