"""Launch lines behind what a script puts in front of them: a wrapper array the script sets in an if/else
(``"${PROFILE_CMD[@]}" python -m torch.distributed.run ...``, Megatron-LM's examples/megatron_fsdp), and a command
string run by a shell (``srun ... bash -c "${CMD}"``)."""

from __future__ import annotations

from meshlint.engine.check import Options, check_all
from meshlint.engine.ruleset import load_rules
from meshlint.inputs.scripts import launches_in_text

OPTIONS = Options(rules=load_rules())
MODEL = ("--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
         "--micro-batch-size 1 --global-batch-size 8")
PROFILED = f"""#!/bin/bash
if [ "$PROFILE" = 1 ]; then
    PROFILE_CMD=(nsys profile -o out)
else
    PROFILE_CMD=()
fi
MODEL_ARGS=({MODEL})
"${{PROFILE_CMD[@]}}" python -m torch.distributed.run --nproc_per_node 8 pretrain_gpt.py ${{MODEL_ARGS[@]}} \\
    --tensor-model-parallel-size 3
"""


def check(tmp_path, text: str):
    path = tmp_path / "train.sh"
    path.write_text(text)
    return check_all(str(path), OPTIONS)


def test_a_wrapper_the_script_does_not_determine_is_read_past(tmp_path):
    (report,) = check(tmp_path, PROFILED)
    assert report.status == "checked" and report.dialect == "megatron"
    assert report.topology.world_size == 8
    assert {"ML960", "ML304"} <= {f.code for f in report.findings}  # tp = 3 on 8 GPUs, 4 heads
    (launch,) = launches_in_text(PROFILED, "train.sh")
    assert launch.notes[0].startswith('"${PROFILE_CMD[@]}" (line 8) before the command expands to words the script '
                                      "does not determine ($PROFILE_CMD is set inside an if/loop block")
    assert launch.notes[0].endswith("read as a wrapper of the command (a profiler, numactl, or nothing), checked as "
                                    "run without it")


def test_a_wrapper_before_something_that_is_no_launch_is_still_nothing():
    assert launches_in_text('"${PROFILE_CMD[@]}" echo pretrain_gpt.py\n"$@" --tp 4\n', "x.sh") == []
    assert launches_in_text('"$@" python pretrain_gpt.py --num-layers 4\n', "x.sh") == []  # the script's own args


SHELL_STRING = f"""#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
OPTS="{MODEL} --tensor-model-parallel-size 3"
CMD="cd /work; export X=1; python pretrain_gpt.py ${{OPTS}}"
srun -l {{shell}} "${{CMD}}" 2>&1 | tee log.txt
"""


def test_the_command_string_a_shell_runs_is_read_with_srun_before_it(tmp_path):
    for shell in ("bash -c", "sh -c", "bash -x -c", "bash -lc"):
        (report,) = check(tmp_path, SHELL_STRING.replace("{shell}", shell))
        assert report.status == "checked" and report.dialect == "megatron", shell
        assert report.topology.world_size == 16 and report.topology.gpus_per_node == 8  # srun in the allocation
        tp = next(f for f in report.findings if f.code == "ML960")
        col = 9 + len(shell) + 1
        assert (tp.line, tp.col) == (6, col), shell  # the string itself: its words have no place of their own
    (launch,) = launches_in_text(SHELL_STRING.replace("{shell}", "bash -c"), "train.sh")
    assert launch.notes[0] == "read from the command string bash -c runs (line 6): its options are placed at that string"


def test_a_torchtitan_launch_in_a_command_string(tmp_path):
    text = ('CMD="torchrun --nproc_per_node 4 -m torchtitan.train --job.config_file cfg.toml '
            '--parallelism.tensor_parallel_degree 8"\nbash -c "$CMD"\n')
    (launch,) = launches_in_text(text, "run.sh")
    assert launch.notes[0] == ("read from the command string bash -c runs (line 2): its options are placed at that "
                               "string, written on line 1")
    assert launch.overrides[-1].position[1] == 1  # the string is written on line 1, as it is run


def test_a_command_string_the_script_does_not_determine_is_no_launch():
    text = 'CMD="python -u ${MEGATRON_CODE_DIR}/pretrain_gpt.py ${MEGATRON_PARAMS}"\nsrun -l sh -c "${CMD}"\n'
    assert launches_in_text(text, "SRUN.sh") == []
    assert launches_in_text('bash -c\nbash -x\nsh -c "echo pretrain_gpt.py"\nbash job.sh\n', "x.sh") == []


def test_a_shell_inside_the_string_is_not_read_again():
    inner = f"python pretrain_gpt.py {MODEL}"
    assert len(launches_in_text(f'A="{inner}"\nbash -c "$A"\n', "x.sh")) == 1
    assert launches_in_text(f'A="{inner}"\nB="bash -c $A"\nbash -c "$B"\n', "x.sh") == []  # one level


NO_PYTHON = [  # torchrun --no-python runs the program as given: here the interpreter, with its own options
    "torchrun --nproc_per_node 8 --no-python python -u pretrain_gpt.py {model} --tensor-model-parallel-size 3",
    "torchrun --nproc-per-node=8 --no_python python3 -X dev pretrain_gpt.py {model} --tensor-model-parallel-size 3",
    "torchrun --nproc_per_node 8 --no-python /usr/bin/python3.11 pretrain_gpt.py {model} --tensor-model-parallel-size 3",
]


def test_torchrun_no_python_reads_what_the_interpreter_runs(tmp_path):
    for line in NO_PYTHON:
        (report,) = check(tmp_path, "#!/bin/bash\n" + line.format(model=MODEL) + "\n")
        assert report.status == "checked" and report.dialect == "megatron", line
        assert report.topology.world_size == 8, line
        assert "ML304" in {f.code for f in report.findings}, line  # 4 heads on tp = 3
    # a program that is not python is not a launch meshlint reads; nor is --no-python with torchrun's own -m
    assert launches_in_text("torchrun --nproc_per_node 8 --no-python ./train.sh --tp 4\n", "x.sh") == []
    assert launches_in_text("torchrun --no-python python -c 'print(1)'\n", "x.sh") == []
