"""Accelerate 1.15.0's launcher (utils/launch.py) on what it does per machine: gpu_ids against the processes it
starts, DeepSpeed's default multinode launcher, 0 processes per machine, the port and fp8 values it dies on, and
launches in a shell's command string."""

from __future__ import annotations

from conftest import ROOT

from meshlint.engine.check import Options, check_file
from meshlint.engine.ruleset import load_rules

RULES = load_rules()
CASES = ROOT / "fixtures" / "rules"


def _check(tmp_path, text: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return check_file(str(path), Options(rules=RULES))


def _codes(report) -> set:
    return {f.code for f in report.findings}


MULTI = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmain_process_ip: 10.0.0.1\n"


def test_gpu_ids_fewer_than_the_processes_of_the_machine(tmp_path):
    report = _check(tmp_path, MULTI + "gpu_ids: 0,1\nmachine_rank: 1\nnum_machines: 2\nnum_processes: 10\n")
    (f,) = [f for f in report.findings if f.code == "ML929"]
    assert f.line == 4 and f.severity == "warning"
    assert "lists 2 GPUs" in f.message and "starts 5 processes" in f.message and "10 // 2" in f.message
    for enough in ("gpu_ids: 0,1,2,3,4\n", "gpu_ids: all\n", ""):
        report = _check(tmp_path, MULTI + enough + "num_machines: 2\nnum_processes: 10\n")
        assert "ML929" not in _codes(report), enough


def test_gpu_ids_on_a_launch_line(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("accelerate launch --multi_gpu --num_processes 4 --gpu_ids 0,1,2 train.py\n")
    report = check_file(str(script), Options(rules=RULES))
    assert [f.message for f in report.findings if f.code == "ML929"][0].startswith("gpu_ids = 0,1,2 lists 3 GPUs")


def test_deepspeed_on_several_machines_with_the_default_pdsh_launcher(tmp_path):
    ds = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_machines: 2\nnum_processes: 16\n"
    report = _check(tmp_path, ds + "machine_rank: 1\n")
    (f,) = [f for f in report.findings if f.code == "ML930"]
    assert "--hostfile None" in f.message and "--num_gpus 8" in f.message and "machine_rank 1 is ignored" in f.message
    assert "standard" in f.help
    for fixed in ("deepspeed_config:\n  deepspeed_multinode_launcher: standard\n",
                  "deepspeed_config:\n  deepspeed_hostfile: /job/hostfile\n"):
        assert "ML930" not in _codes(_check(tmp_path, ds + fixed)), fixed
    single = ds.replace("num_machines: 2", "num_machines: 1").replace("16", "8")
    assert "ML930" not in _codes(_check(tmp_path, single))


def test_deepspeed_launcher_from_the_launch_line(tmp_path):
    (tmp_path / "ds.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
                                      "num_machines: 1\nnum_processes: 8\n")
    script = tmp_path / "run.sh"
    line = "accelerate launch --config_file ds.yaml --num_processes 16 --num_machines 2 --machine_rank 0 train.py\n"
    script.write_text(line)
    assert "ML930" in _codes(check_file(str(script), Options(rules=RULES)))
    script.write_text(line.replace("train.py", "--deepspeed_multinode_launcher standard train.py"))
    assert "ML930" not in _codes(check_file(str(script), Options(rules=RULES)))


def test_zero_processes_per_machine_is_an_error_not_ml926(tmp_path):
    report = _check(tmp_path, MULTI + "num_machines: 2\nnum_processes: 1\n")
    assert "ML931" in _codes(report) and "ML926" not in _codes(report)
    assert [f.severity for f in report.findings if f.code == "ML931"] == ["error"]
    report = _check(tmp_path, MULTI + "num_machines: 2\nnum_processes: 5\n")
    assert "ML926" in _codes(report) and "ML931" not in _codes(report)


def test_main_process_port_outside_the_tcp_range(tmp_path):
    report = _check(tmp_path, MULTI + "machine_rank: 0\nmain_process_port: 99999\nnum_machines: 2\nnum_processes: 4\n")
    (f,) = [f for f in report.findings if f.code == "ML101"]
    assert f.line == 5 and "99999" in f.message and "OverflowError" in f.message
    assert "ML101" not in _codes(_check(tmp_path, MULTI + "main_process_port: 29500\nnum_processes: 4\n"))


def test_fp8_override_linear_precision_must_be_three_booleans(tmp_path):
    fp8 = ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: fp8\nnum_processes: 8\n"
           "fp8_config:\n  backend: TE\n  override_linear_precision: {}\n")
    report = _check(tmp_path, fp8.format("false"))
    (f,) = [f for f in report.findings if f.code == "ML101"]
    assert f.line == 7 and "three booleans" in f.message and "TypeError" in f.message
    assert "ML101" not in _codes(_check(tmp_path, fp8.format("[false, false, false]")))
    assert "ML101" not in _codes(_check(tmp_path, fp8.format("false").replace("fp8\n", "bf16\n")))


def test_ml922_says_one_process_in_the_singular(tmp_path):
    report = _check(tmp_path, "distributed_type: MULTI_GPU\nnum_processes: 1\nparallelism_config:\n"
                              "  parallelism_config_dp_replicate_size: 2\n")
    (f,) = [f for f in report.findings if f.code == "ML922"]
    assert "starts 1 process (" in f.message


def test_ml927_says_what_1_15_does_not_the_fixed_keyerror():
    report = check_file(str(CASES / "ML927-accelerate-tp-with-fsdp2-optimizer" / "bad.yaml"), Options(rules=RULES))
    (f,) = [f for f in report.findings if f.code == "ML927"]
    assert f.severity == "info" and "skip the TP preparation" in f.message and "KeyError" not in f.message
    assert "tp_plan='auto'" in f.message


def test_accelerate_launch_in_a_shell_command_string(tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"
                      'CMD="accelerate launch --multi_gpu --num_machines 2 --num_processes 5 --main_process_ip 10.0.0.1 '
                      'train.py"\nsrun -l bash -c "${CMD}"\n')
    report = check_file(str(script), Options(rules=RULES))
    assert report.status == "checked" and "ML926" in _codes(report)


def test_an_address_from_the_shell_does_not_stop_the_launch_being_read(tmp_path):
    # Accelerate's own examples/slurm/submit_multinode.sh shape: the IP from $(scontrol ...) in a LAUNCHER string
    script = tmp_path / "job.sbatch"
    script.write_text('#!/bin/bash\n#SBATCH --nodes=2\nhead=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
                      'export LAUNCHER="accelerate launch --num_processes $((SLURM_NNODES * 4 + 1)) '
                      '--num_machines $SLURM_NNODES --rdzv_backend c10d --main_process_ip $head --main_process_port 29500"\n'
                      'export CMD="$LAUNCHER train.py --mixed_precision fp16"\nsrun $CMD\n')
    report = check_file(str(script), Options(rules=RULES))
    # 9 processes on 2 machines: 4 each (ML926); no --machine_rank and no config file: int(None) (ML933)
    assert report.status == "checked" and _codes(report) == {"ML926", "ML933"}


def test_a_word_that_may_hide_flags_still_skips_the_launch_and_says_which(tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text('#!/bin/bash\nhead=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
                      'export LAUNCHER="accelerate launch --num_processes 8 --num_machines 2 --main_process_ip $head"\n'
                      'srun $LAUNCHER $EXTRA_FLAGS train.py\n')
    report = check_file(str(script), Options(rules=RULES))
    assert report.status == "skipped" and "line 4" in report.note and "$EXTRA_FLAGS" in report.note
    assert "scontrol" not in report.note


def test_num_processes_the_script_does_not_determine_is_unknown_not_an_error(tmp_path):
    script = tmp_path / "job.sbatch"  # no #SBATCH --nodes: the sbatch call gives it
    script.write_text("#!/bin/bash\nsrun accelerate launch --num_machines $SLURM_NNODES "
                      "--num_processes $((SLURM_NNODES * 8)) --main_process_ip $MASTER_ADDR train.py\n")
    report = check_file(str(script), Options(rules=RULES))
    assert report.status == "checked" and not [c for c in _codes(report) if c != "ML105"]


def _rank_script(tmp_path, launch: str, header: str = "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"):
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\n" + header + "MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)\n"
                      + launch + "\n")
    return check_file(str(script), Options(rules=RULES))


RANKED = "--multi_gpu --num_machines 2 --num_processes 16 --main_process_ip $MASTER_ADDR"


def test_machine_rank_expanded_once_directly_under_srun(tmp_path):
    report = _rank_script(tmp_path, f"srun accelerate launch {RANKED} --machine_rank $SLURM_NODEID train.py")
    (f,) = [f for f in report.findings if f.code == "ML932"]
    assert f.severity == "error" and (f.line, f.col) == (5, 118) and "$SLURM_NODEID" in f.message
    assert "\\$SLURM_NODEID" in f.help and "c10d" in f.help


def test_machine_rank_expanded_once_in_a_double_quoted_string(tmp_path):
    report = _rank_script(tmp_path, f'srun bash -c "accelerate launch {RANKED} --machine_rank $SLURM_PROCID train.py"')
    assert _codes(report) == {"ML932"}


def test_machine_rank_through_a_variable_with_a_default(tmp_path):
    # huggingface/accelerate#3312's shape: MACHINE_RANK=${SLURM_NODEID:-0} in the batch script
    report = _rank_script(tmp_path, f"MACHINE_RANK=${{SLURM_NODEID:-0}}\n"
                                    f"srun accelerate launch {RANKED} --machine_rank $MACHINE_RANK train.py")
    (f,) = [f for f in report.findings if f.code == "ML932"]
    assert f.line == 5


def test_machine_rank_each_task_expands_is_not_reported(tmp_path):
    for launch in (f"srun bash -c 'accelerate launch {RANKED} --machine_rank $SLURM_PROCID train.py'",
                   f'srun bash -c "accelerate launch {RANKED} --machine_rank \\$SLURM_PROCID train.py"',
                   f"srun accelerate launch --rdzv_backend c10d {RANKED} --machine_rank $SLURM_PROCID train.py",
                   f"accelerate launch {RANKED} --machine_rank $SLURM_PROCID train.py"):  # a script srun runs
        report = _rank_script(tmp_path, launch)
        assert report.status == "checked" and "ML932" not in _codes(report), launch
    # one machine: the same rank everywhere is the right one
    report = _rank_script(tmp_path, "srun accelerate launch --num_machines 1 --num_processes 8 "
                                    "--machine_rank $SLURM_PROCID train.py")
    assert "ML932" not in _codes(report)


def test_several_machines_without_machine_rank_or_config(tmp_path):
    # Accelerate's examples/slurm/submit_multinode.sh launch (PR #2096's TypeError), then with a rank, with a file
    base = "srun accelerate launch --multi_gpu --num_processes 16 --num_machines 4 --rdzv_backend c10d train.py"
    report = _rank_script(tmp_path, base)
    (f,) = [f for f in report.findings if f.code == "ML933"]
    assert f.severity == "warning" and "utils/launch.py:219" in f.message and "NoneType" in f.message
    assert "ML933" not in _codes(_rank_script(tmp_path, base.replace("train.py", "--machine_rank 0 train.py")))
    (tmp_path / "cfg.yaml").write_text("distributed_type: MULTI_GPU\nnum_machines: 4\nnum_processes: 16\n")
    report = _rank_script(tmp_path, base.replace("train.py", f"--config_file {tmp_path / 'cfg.yaml'} train.py"))
    assert report.status == "checked" and "ML933" not in _codes(report)
    # one machine: no rank is needed
    assert "ML933" not in _codes(_rank_script(tmp_path, "srun accelerate launch --num_processes 8 train.py"))
