"""torchtitan launch lines, launch scripts, overrides and saved configs (meshlint/inputs/launch.py,
scripts.py, ttroot.py): tyro parity, the real run_train.sh and multinode_trainer.slurm, hostile scripts."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import pytest

from conftest import FIXTURES, ROOT
from meshlint.errors import InputError
from meshlint.inputs.launch import (
    COMMAND_LINE,
    UnknownValue,
    apply_overrides,
    parse_launch_args,
    parse_overrides,
    read_saved_config,
)
from meshlint.inputs.pysource import PySource
from meshlint.inputs.scripts import launches_in_text, read_launch_script
from meshlint.inputs.ttroot import find_root

TT_MAIN = Path("/work/shared/frameworks/torchtitan-b5bcd76c6")
LAUNCH = FIXTURES / "torchtitan_launch"
MAIN = "main@b5bcd76c6"
needs_checkout = pytest.mark.skipif(not (TT_MAIN / "torchtitan" / "config").is_dir(),
                                    reason="torchtitan main checkout (../shared/frameworks) not present")


def overrides(*args, version=MAIN):
    return parse_overrides(list(args), version=version)


def source(data=None, types=None, file="reg.py"):
    return PySource(file=file, function="f", text="", data=data or {}, unknown={}, positions={}, comments=[],
                    def_line=3, def_col=1, types={"": "Trainer.Config", **(types or {})})


# ----------------------------------------------------------------------------- tyro parity
#
# A mirror of torchtitan main's frozen CLI dataclasses (configs.py at b5bcd76c6, same field types),
# the activation_checkpoint subcommand union (activation_checkpoint.py:332-337) and torchtitan's
# comma rule for list[str] (manager.py:239-250). tyro itself parses each line; meshlint must agree
# on the values, and refuse exactly the lines tyro refuses.

tyro = pytest.importorskip("tyro", reason="tyro not installed: parity with torchtitan's parser not checked")


@dataclass(kw_only=True, slots=True)
class MTraining:
    num_tokens_per_microbatch_per_dp_rank: int = 16384
    num_tokens_per_train_step: int = -1
    max_context_length: int = 2048
    max_norm: float | int = 1.0
    steps: int = 10000
    enable_cpu_offload: bool = False
    disable_cuda_graphs: bool = False
    dtype: Literal["bfloat16", "float32"] = "float32"
    mixed_precision_param: Literal["bfloat16", "float32"] = "bfloat16"
    mixed_precision_reduce: Literal["float32"] = "float32"
    gc_freq: int = 50
    gc_debug: bool = False


@dataclass(kw_only=True, slots=True)
class MParallelism:
    data_parallel_replicate_degree: int = 1
    data_parallel_shard_degree: int = -1
    fsdp_reshard_after_forward: Literal["default", "always", "never"] = "default"
    enable_fsdp_symm_mem: bool = False
    tensor_parallel_degree: int = 1
    enable_sequence_parallel: bool = True
    spmd_backend: Literal["partial_dtensor", "spmd_types"] = "spmd_types"
    pipeline_parallel_degree: int = 1
    module_fqns_per_model_part: list[list[str]] | None = None
    pipeline_parallel_first_stage_less_layers: int = 1
    pipeline_parallel_last_stage_less_layers: int = 1
    pipeline_parallel_layers_per_stage: int | None = None
    pipeline_parallel_schedule: str = "1F1B"
    pipeline_parallel_schedule_csv: str | None = ""
    num_pp_microbatches: int = 1
    context_parallel_degree: int = 1
    context_parallel_load_balancer: str | None = "headtail"
    context_parallel_ptrr_mask_key: str | None = None
    expert_parallel_degree: int = 1


@dataclass(kw_only=True, slots=True)
class MCompile:
    enable: bool = False
    enable_async_tensor_parallel: bool = False
    components: list[str] = field(default_factory=lambda: ["model", "loss"])
    backend: str = "inductor"


@dataclass(kw_only=True, slots=True)
class MComm:
    init_timeout_seconds: int = 300
    mode: Literal["default", "fake_backend", "local_tensor", "torchcomms"] = "default"


@dataclass(kw_only=True, slots=True)
class MDebug:
    seed: int | None = None
    deterministic: bool = False
    save_config_file: str | None = None
    enable_structured_logging: bool = True


@dataclass(kw_only=True, slots=True)
class FullAC:
    preserve_rng_state: bool = True
    debug: bool = False


@dataclass(kw_only=True, slots=True)
class SelectiveAC:
    preserve_rng_state: bool = True
    debug: bool = False


ACConfig = (Annotated[SelectiveAC, tyro.conf.subcommand("selective")]
            | Annotated[FullAC, tyro.conf.subcommand("full")]
            | Annotated[None, tyro.conf.subcommand("none")])


@dataclass(kw_only=True, slots=True)
class MConfig:
    hf_assets_path: str = "./tests/assets/tokenizer"
    dump_folder: str = "./outputs"
    training: MTraining = field(default_factory=MTraining)
    parallelism: MParallelism = field(default_factory=MParallelism)
    activation_checkpoint: ACConfig = field(default_factory=SelectiveAC)
    compile: MCompile = field(default_factory=MCompile)
    comm: MComm = field(default_factory=MComm)
    debug: MDebug = field(default_factory=MDebug)


_REGISTRY = tyro.constructors.ConstructorRegistry()


@_REGISTRY.primitive_rule
def _list_str_rule(type_info):
    if type_info.type != list[str]:
        return None
    return tyro.constructors.PrimitiveConstructorSpec(
        nargs=1, metavar="A,B,C,...", instance_from_str=lambda args: args[0].split(","),
        is_instance=lambda instance: all(isinstance(i, str) for i in instance),
        str_from_instance=lambda instance: [",".join(instance)])


PARITY = [
    ["--parallelism.tensor_parallel_degree", "8"],
    ["--parallelism.tensor_parallel_degree=8"],
    ["--parallelism.tensor-parallel-degree", "8"],
    ["--parallelism.tensor-parallel_degree", "8"],
    ["--parallelism.tensor_parallel_degree", "4", "--parallelism.tensor-parallel-degree=8"],   # last wins
    ["--training.disable_cuda_graphs"],
    ["--training.disable-cuda-graphs"],
    ["--training.no-disable-cuda-graphs"],
    ["--training.no_disable_cuda_graphs"],
    ["--training.no-disable_cuda_graphs"],
    ["--training.disable_cuda_graphs", "--training.no-disable-cuda-graphs"],
    ["--training.no-disable-cuda-graphs", "--training.disable-cuda-graphs"],
    ["--parallelism.no-enable-sequence-parallel"],
    ["--parallelism.enable_sequence_parallel"],
    ["--training.disable_cuda_graphs", "True"],
    ["--training.disable_cuda_graphs=True"],
    ["--training.disable_cuda_graphs=False"],
    ["--parallelism.data_parallel_shard_degree", "-1"],
    ["--parallelism.data_parallel_shard_degree=-2"],
    ["--debug.seed", "-5"],
    ["--parallelism.tensor_parallel_degree", "-0"],
    ["--parallelism.tensor_parallel_degree", " 4"],
    ["--parallelism.tensor_parallel_degree", "+4"],
    ["--parallelism.tensor_parallel_degree", "1_0"],
    ["--parallelism.tensor_parallel_degree", "-1_0"],
    ["--parallelism.tensor_parallel_degree", "4.0"],
    ["--parallelism.tensor_parallel_degree", "0x10"],
    ["--parallelism.tensor_parallel_degree", "abc"],
    ["--parallelism.tensor_parallel_degree", ""],
    ["--parallelism.tensor_parallel_degree="],
    ["--parallelism.tensor_parallel_degree"],
    ["--parallelism.tensor_parallel_degree", "--parallelism.pipeline_parallel_degree", "2"],
    ["--parallelism.tensor_parallel_degree", "8", "9"],
    ["--parallelism.tensor_parallel_degre", "8"],
    ["--parallelism.tensor_parallel", "8"],
    ["--Parallelism.tensor_parallel_degree", "8"],
    ["--parallelis.tensor_parallel_degree", "8"],
    ["--training.max_norm", "2"],
    ["--training.max_norm", "2.5"],
    ["--training.max_norm", "1e3"],
    ["--training.max_norm", "-1e3"],
    ["--training.max_norm", "-.5"],
    ["--training.max_norm", "inf"],
    ["--training.max_norm", "-inf"],
    ["--training.max_norm", "x"],
    ["--training.dtype", "bfloat16"],
    ["--training.dtype", "fp8"],
    ["--training.dtype", "BFLOAT16"],
    ["--parallelism.spmd_backend=partial_dtensor"],
    ["--parallelism.spmd_backend", "spmd-types"],
    ["--parallelism.pipeline_parallel_layers_per_stage", "None"],
    ["--parallelism.pipeline_parallel_layers_per_stage", "none"],
    ["--parallelism.pipeline_parallel_layers_per_stage", "3"],
    ["--parallelism.context_parallel_load_balancer", "None"],
    ["--parallelism.context_parallel_load_balancer", "none"],
    ["--parallelism.pipeline_parallel_schedule_csv", "None"],
    ["--parallelism.pipeline_parallel_schedule", "-foo"],
    ["--parallelism.pipeline_parallel_schedule=-foo"],
    ["--parallelism.pipeline_parallel_schedule", "-1x"],
    ["--parallelism.pipeline_parallel_schedule", "-"],
    ["--parallelism.pipeline_parallel_schedule", "--"],
    ["--parallelism.pipeline_parallel_schedule=--x"],
    ["--parallelism.pipeline_parallel_schedule", "Interleaved1F1B"],
    ["--compile.components", "model"],
    ["--compile.components", "model,loss"],
    ["--compile.components=model,loss,x"],
    ["--compile.components", "model", "loss"],
    ["--compile.components="],
    ["--parallelism.module_fqns_per_model_part", "tok_embeddings,layers.0", "layers.1,norm,output"],
    ["--parallelism.module_fqns_per_model_part"],
    ["--parallelism.module_fqns_per_model_part", "None"],
    ["--parallelism.module_fqns_per_model_part=a", "b", "--parallelism.tensor_parallel_degree", "2"],
    ["--comm.mode", "fake_backend"],
    ["--comm.mode", "fake"],
    ["--debug.seed", "None"],
    ["--debug.save_config_file", "cfg.json"],
    ["--debug.save-config-file=None"],
    ["--dump_folder", "x", "--dump-folder", "y"],
    ["--hf-assets-path=/data/hf"],
    ["activation-checkpoint:full"],
    ["activation_checkpoint:full"],
    ["activation-checkpoint:none"],
    ["activation-checkpoint:None"],
    ["activation-checkpoint:selective", "--activation-checkpoint.debug"],
    ["activation-checkpoint:full", "--activation_checkpoint.no-preserve-rng-state"],
    ["--parallelism.tensor_parallel_degree", "4", "activation-checkpoint:full"],
    ["activation-checkpoint:full", "--parallelism.tensor_parallel_degree", "4"],
    ["activation-checkpoint:full", "activation-checkpoint:none"],
    ["--activation_checkpoint.debug"],
    ["ACTIVATION-CHECKPOINT:FULL"],
    ["--parallelism.tensor_parallel_degree", "2", "--", "--parallelism.tensor_parallel_degree", "4"],
    ["--"],
    ["stray"],
    ["-x"],
    ["--training"],
    [],
]


_TYRO_SEEN: dict = {}


def _tyro(args):
    key = tuple(args)
    if key not in _TYRO_SEEN:
        try:
            _TYRO_SEEN[key] = tyro.cli(MConfig, args=args, default=MConfig(), registry=_REGISTRY, console_outputs=False)
        except SystemExit:
            _TYRO_SEEN[key] = None
    return _TYRO_SEEN[key]


def _flatten(config) -> dict:
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == "activation_checkpoint":
            out[f.name] = None if value is None else type(value).__name__
            if value is not None:
                for g in dataclasses.fields(value):
                    out[f"{f.name}.{g.name}"] = getattr(value, g.name)
        elif dataclasses.is_dataclass(value):
            for g in dataclasses.fields(value):
                out[f"{f.name}.{g.name}"] = getattr(value, g.name)
        else:
            out[f.name] = value
    return out


def _meshlint(args):
    try:
        found = overrides(*args)
    except InputError:
        return None
    defaults = MConfig()
    data = {}
    for f in dataclasses.fields(defaults):
        value = getattr(defaults, f.name)
        data[f.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    src = source(data, {"activation_checkpoint": "SelectiveAC.Config"})
    try:
        apply_overrides(src, found, version=MAIN)
    except InputError:
        return None
    out = {}
    for name, value in src.data.items():
        if name == "activation_checkpoint":
            cls = src.types.get(name) if value is not None else None
            out[name] = None if cls is None else cls.split(".")[0]
            if value is not None:
                base = dataclasses.asdict(SelectiveAC() if out[name] == "SelectiveAC" else FullAC())
                for key, v in {**base, **value}.items():
                    out[f"{name}.{key}"] = v
        elif isinstance(value, dict):
            for key, v in value.items():
                out[f"{name}.{key}"] = v
        else:
            out[name] = value
    return out


@pytest.mark.parametrize("args", PARITY, ids=[" ".join(a) or "(none)" for a in PARITY])
def test_tyro_parity(args):
    expected = _tyro(args)
    got = _meshlint(args)
    if expected is None:
        assert got is None, f"tyro refuses {args}, meshlint accepted it"
        return
    assert got is not None, f"tyro accepts {args}, meshlint refused it"
    want = _flatten(expected)
    for key, value in want.items():
        have = got.get(key)
        if isinstance(value, float) and value != value:
            assert have != have
        else:
            assert have == value and type(have) is type(value), f"{key}: tyro {value!r}, meshlint {have!r}"


def test_parity_covers_refusals_and_acceptances():
    outcomes = [_tyro(a) is None for a in PARITY]
    assert sum(outcomes) >= 25 and len(outcomes) - sum(outcomes) >= 50


# ----------------------------------------------------------------------------- messages and typing

def test_unknown_option_message_names_the_token_and_a_suggestion():
    # with no version yet, a strict section's unknown field waits for the checkout (whose own dataclass may
    # define it); apply_overrides then refuses it against the applied version
    launch = parse_launch_args(["--module", "llama3", "--config", "llama3_8b", "--parallelism.tensor_parallel_degre",
                                "8"])
    assert [o.typed for o in launch.overrides] == [False]
    with pytest.raises(InputError) as err:
        apply_overrides(source(), launch.overrides, version=MAIN)
    e = err.value
    assert e.code == "ML006" and "--parallelism.tensor_parallel_degre" in e.message
    assert "Unrecognized options" in e.message and "tensor_parallel_degree" in e.help
    assert e.col == len("--module llama3 --config llama3_8b ") + 1


def test_renamed_keys_point_to_the_new_name():
    with pytest.raises(InputError) as err:
        overrides("--training.local_batch_size", "8")
    assert "num_tokens_per_microbatch_per_dp_rank" in err.value.help
    assert overrides("--training.local_batch_size", "8", version="0.3.0")[0].value == 8
    with pytest.raises(InputError) as err:
        overrides("--training.max_context_length", "8", version="0.3.0")
    assert "0.3.0 calls it --training.seq_len" in err.value.help
    either = overrides("--training.local_batch_size", "8", version=None)                # either version
    assert either[0].value == 8
    with pytest.raises(InputError) as err:                   # applied as main: refused, with the new name
        apply_overrides(source({"training": {}}), either, version=MAIN)
    assert "num_tokens_per_microbatch_per_dp_rank" in err.value.help
    src = source({"training": {}})
    apply_overrides(src, either, version="0.3.0")
    assert src.data["training"]["local_batch_size"] == 8


def test_bool_flag_with_a_value_is_refused_as_tyro_does():
    with pytest.raises(InputError) as err:
        overrides("--training.disable_cuda_graphs", "True")
    assert "Unrecognized options: True" in err.value.message
    with pytest.raises(InputError) as err:
        overrides("--training.disable_cuda_graphs=true")
    assert "takes no value" in err.value.message and "--training.no-disable-cuda-graphs" in err.value.help


def test_model_is_not_on_the_command_line():
    for flag in ("--model.name", "--model_spec.flavor"):
        with pytest.raises(InputError) as err:
            overrides(flag, "llama3")
        assert "tyro.conf.Suppress" in err.value.message


def test_huge_integer_is_a_limit_not_a_crash():
    with pytest.raises(InputError) as err:
        overrides("--parallelism.tensor_parallel_degree", "9" * 5000)
    assert err.value.code == "ML007"


def test_component_options_take_the_type_of_the_configs_value():
    found = overrides("--lr_scheduler.warmup_steps", "5", "--optimizer.param_groups.0.optimizer_kwargs.betas",
                      "0.9", "0.99", "--checkpoint.enable", "--metrics.no-enable-tensorboard",
                      "--validator.freq=100")
    # fields main's components have are typed (COMPONENT_FIELDS); the others by the config's value
    assert [o.typed for o in found] == [True, False, True, True, True]
    src = source({"lr_scheduler": {"warmup_steps": 2}, "optimizer": {"param_groups": [
        {"optimizer_kwargs": {"betas": [0.9, 0.95], "lr": 8e-4}}]}, "metrics": {"enable_tensorboard": True}})
    apply_overrides(src, found)
    assert src.data["lr_scheduler"]["warmup_steps"] == 5
    assert src.data["optimizer"]["param_groups"][0]["optimizer_kwargs"]["betas"] == [0.9, 0.99]
    assert src.data["checkpoint"]["enable"] is True
    assert src.data["metrics"]["enable_tensorboard"] is False
    assert src.data["validator"]["freq"] == 100
    [raw] = overrides("--validator.save_img_count", "3")                  # flux's validator: not in the table
    assert (raw.value, raw.typed) == ("3", False)
    with pytest.raises(InputError, match="Unrecognized options: True"):
        overrides("--checkpoint.enable", "True")                          # tyro refuses it the same way
    assert src.locate("optimizer.param_groups[0].optimizer_kwargs.betas") == found[1].position[1:]


def test_component_value_of_the_wrong_type_is_unknown_not_guessed():
    src = source({"validator": {"save_img_count": 2}})
    apply_overrides(src, overrides("--validator.save_img_count", "soon"))
    assert "save_img_count" not in str(src.data)
    assert src.unknown_of("validator.save_img_count") is not None


def test_unknown_section_is_refused_for_a_plain_trainer_config_only():
    found = overrides("--fault_tolerance.enable")
    with pytest.raises(InputError) as err:
        apply_overrides(source(), found)
    assert "no section 'fault_tolerance'" in err.value.message
    subclass = source(types={"": "FTTrainer.Config"})
    apply_overrides(subclass, found)
    assert subclass.data["fault_tolerance"]["enable"] is True
    with pytest.raises(InputError) as err:
        apply_overrides(source(), overrides("--paralelism.tensor_parallel_degree", "2", version=None))
    assert "did you mean --parallelism.tensor_parallel_degree" in err.value.help


# ----------------------------------------------------------------------------- applying

def test_apply_sets_values_positions_and_files():
    src = source({"parallelism": {"tensor_parallel_degree": 8}, "training": {"steps": 10}},
                 {"parallelism": "ParallelismConfig"})
    src.positions.update({"parallelism": (10, 9), "parallelism.tensor_parallel_degree": (11, 13),
                          "training.steps": (12, 13)})
    launch = parse_launch_args(["--module", "llama3", "--config", "f", "--parallelism.tensor_parallel_degree",
                                "16", "--parallelism.pipeline_parallel_degree=2"])
    apply_overrides(src, launch.overrides, version=MAIN)
    assert src.data["parallelism"] == {"tensor_parallel_degree": 16, "pipeline_parallel_degree": 2}
    assert src.locate("parallelism.tensor_parallel_degree") == (1, launch.overrides[0].position[2])
    assert src.file_of("parallelism.tensor_parallel_degree") == COMMAND_LINE
    assert src.file_of("training.steps") == "reg.py" and src.locate("training.steps") == (12, 13)
    assert src.file_of("parallelism.context_parallel_degree") == "reg.py"    # defaulted: the section call
    assert src.has_key("parallelism.pipeline_parallel_degree")
    # alternatives: locate picks the first that is set, file_of(key, line, col) answers the same
    line, col = src.locate("training.disable_cuda_graphs|parallelism.pipeline_parallel_degree")
    assert src.file_of("training.disable_cuda_graphs", line, col) == COMMAND_LINE
    assert src.overridden["parallelism.tensor_parallel_degree"].text == "--parallelism.tensor_parallel_degree 16"


def test_apply_without_overrides_still_names_files():
    src = source({"parallelism": {"tensor_parallel_degree": 8}})
    apply_overrides(src, [])
    assert src.file_of("parallelism.tensor_parallel_degree") == "reg.py" and src.overridden == {}


def test_apply_works_on_copies():
    shared = {"parallelism": {"tensor_parallel_degree": 8}}
    a, b = source(shared), source(shared)
    b.data = a.data                      # a reader may hand out the same dicts twice
    apply_overrides(a, overrides("--parallelism.tensor_parallel_degree", "2"))
    assert shared["parallelism"]["tensor_parallel_degree"] == 8
    assert b.data["parallelism"]["tensor_parallel_degree"] == 8


def test_unknown_value_makes_the_path_unknown():
    [launch] = launches_in_text("torchrun --nproc_per_node=8 -m torchtitan.train --module llama3 --config f "
                                "--parallelism.tensor_parallel_degree $TP --training.steps 5\n", file="run.sh")
    tp = launch.overrides[0]
    assert isinstance(tp.value, UnknownValue) and "TP is not set in the script" in tp.value.reason
    src = source({"parallelism": {"tensor_parallel_degree": 8}})
    apply_overrides(src, launch.overrides)
    assert "tensor_parallel_degree" not in src.data["parallelism"]
    unknown = src.unknown_of("parallelism.tensor_parallel_degree")
    assert unknown.file == "run.sh" and (unknown.line, unknown.col) == (1, tp.position[2])
    assert src.file_of("parallelism.tensor_parallel_degree") == "run.sh"
    assert src.unknown_of("parallelism.context_parallel_degree") is None
    assert src.data["training"]["steps"] == 5


def test_activation_checkpoint_subcommand():
    src = source({"activation_checkpoint": {"debug": True}}, {"activation_checkpoint": "FullAC.Config"})
    apply_overrides(src, overrides("activation-checkpoint:full", "--activation-checkpoint.preserve-rng-state"))
    assert src.data["activation_checkpoint"] == {"debug": True, "preserve_rng_state": True}
    apply_overrides(src, overrides("activation-checkpoint:selective"))
    assert src.data["activation_checkpoint"] == {} and src.types["activation_checkpoint"] == "SelectiveAC.Config"
    apply_overrides(src, overrides("activation-checkpoint:none"))
    assert src.data["activation_checkpoint"] is None


def test_overrides_of_a_nested_rl_config_go_under_trainer():
    src = source({"parallelism": {}})
    src.nested_under = "trainer"
    outer = {"generator": {}}
    src.outer = outer
    apply_overrides(src, overrides("--trainer.parallelism.tensor_parallel_degree", "2", "--generator.seed", "3",
                                   version=None))
    assert src.data["parallelism"]["tensor_parallel_degree"] == 2
    assert src.outer["generator"]["seed"] == "3" and outer == {"generator": {}}


@needs_checkout
def test_apply_on_a_real_registry_function():
    from meshlint.inputs.pyregistry import read_function

    registry = TT_MAIN / "torchtitan" / "models" / "llama3" / "config_registry.py"
    src = read_function(str(registry), "llama3_70b", root=str(TT_MAIN))
    before = src.locate("parallelism.tensor_parallel_degree")
    text = ("srun torchrun --nnodes 8 --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_70b \\\n"
            "    --parallelism.tensor_parallel_degree 4 --parallelism.pipeline_parallel_degree 2 \\\n"
            "    activation-checkpoint:selective\n")
    [launch] = launches_in_text(text, file="job.sh")
    apply_overrides(src, launch.overrides, version=MAIN)
    assert src.data["parallelism"] == {"tensor_parallel_degree": 4, "pipeline_parallel_degree": 2}
    assert src.locate("parallelism.tensor_parallel_degree") == (2, 5) != before
    assert src.file_of("parallelism.tensor_parallel_degree") == "job.sh"
    assert src.file_of("training.steps") == str(registry)
    assert src.data["training"]["max_context_length"] == 8192
    assert src.types["activation_checkpoint"] == "SelectiveAC.Config"
    fresh = read_function(str(registry), "llama3_70b", root=str(TT_MAIN))
    assert fresh.data["parallelism"] == {"tensor_parallel_degree": 8}    # the reader's copy is untouched


# ----------------------------------------------------------------------------- launch lines

def test_torchrun_command_line():
    launch = parse_launch_args(
        "torchrun --nnodes 8 --nproc_per_node 8 --rdzv_backend c10d --rdzv-endpoint=host:29500 -m torchtitan.train "
        "--module llama3 --config llama3_70b --parallelism.tensor_parallel_degree 8".split())
    assert (launch.module, launch.config, launch.launcher) == ("llama3", "llama3_70b", "torchrun")
    [hint] = launch.hints
    assert (hint.world_size, hint.gpus_per_node, hint.nodes) == (64, 8, 8)
    assert hint.source.startswith("torchrun --nnodes 8 --nproc_per_node 8")
    assert launch.facts["torchrun --rdzv-endpoint"] == "host:29500"


@pytest.mark.parametrize("line, world, gpn, nodes", [
    ("torchrun --nproc-per-node=4 -m torchtitan.train", 4, 4, 1),
    ("torchrun --standalone --nproc_per_node 2 -m torchtitan.train", 2, 2, 1),
    ("torchrun -m torchtitan.train", 1, 1, 1),                               # torchrun's defaults
    ("torchrun --nnodes=2:2 --nproc_per_node=8 torchtitan/train.py", 16, 8, 2),
    ("python -m torch.distributed.run --nnodes 2 --nproc_per_node 4 -m torchtitan.train", 8, 4, 2),
    ("env PET_NPROC_PER_NODE=8 torchrun -m torchtitan.train", 8, 8, 1),
    ("NGPU=4 ./run_train.sh", 4, 4, 1),
    ("MODULE=llama3 CONFIG=llama3_8b bash run_train.sh", 8, 8, 1),          # run_train.sh:29's default
    ("NGPU=32 COMM_MODE=fake_backend ./run_train.sh", 32, None, None),
    ("NGPU=16 python3 -u -m torchtitan.train --comm.mode=local_tensor", 16, None, None),
])
def test_world_size_from_the_launcher(line, world, gpn, nodes):
    argv = line.split()
    if "run_train.sh" not in line:
        argv += ["--module", "llama3", "--config", "llama3_8b"]
    launch = parse_launch_args(argv)
    hint = launch.hints[0]
    assert (hint.world_size, hint.gpus_per_node, hint.nodes) == (world, gpn, nodes)


def test_run_train_sh_defaults_and_fake_mode_overrides():
    launch = parse_launch_args(["NGPU=32", "COMM_MODE=fake_backend", "./run_train.sh",
                                "--parallelism.tensor_parallel_degree", "4"])
    assert (launch.module, launch.config) == ("llama3", "llama3_debugmodel")
    assert [(o.path, o.value) for o in launch.overrides] == [
        ("parallelism.tensor_parallel_degree", 4), ("comm.mode", "fake_backend"), ("training.steps", 1)]
    launch = parse_launch_args(["./run_train.sh", "--module", "qwen3", "--config", "qwen3_0_6b"])
    assert (launch.module, launch.config) == ("qwen3", "qwen3_0_6b")      # "$@" comes after: it wins


def test_elastic_and_device_counts_are_not_guessed():
    launch = parse_launch_args("torchrun --nnodes 1:4 --nproc_per_node 8 -m torchtitan.train --module m "
                               "--config c".split())
    assert launch.hints[0].world_size is None and launch.hints[0].gpus_per_node == 8
    assert any("elastic" in n for n in launch.notes)
    launch = parse_launch_args("torchrun --nproc_per_node gpu -m torchtitan.train --module m --config c".split())
    assert launch.hints == [] and any("counts the node's devices" in n for n in launch.notes)
    launch = parse_launch_args("torchrun --nnodes 0 -m torchtitan.train --module m --config c".split())
    assert launch.hints[0].world_size is None and any("--nnodes '0'" in n for n in launch.notes)


def test_module_and_config_as_torchtitan_takes_them():
    launch = parse_launch_args(["--config=a", "--module", "m", "--parallelism.tensor_parallel_degree", "2",
                                "--config", "b"])
    assert (launch.module, launch.config) == ("m", "b")                    # the last one wins (manager.py)
    with pytest.raises(InputError, match="--config requires a value"):
        parse_launch_args(["--module", "m", "--config"])
    with pytest.raises(InputError, match="--module is required"):
        parse_launch_args(["--config", "c"])
    with pytest.raises(InputError, match="help"):
        parse_launch_args(["--module", "m", "--config", "c", "--help"])


def test_not_a_launch():
    with pytest.raises(InputError, match="starts no training meshlint reads"):
        parse_launch_args(["torchrun", "-m", "other.train", "--module", "m", "--config", "c"])
    assert launches_in_text("python train.py --module llama3 --config x\ntorchrun -m other.train\n") == []
    assert launches_in_text("echo torchtitan.train --module x --config y\n") == []


# ----------------------------------------------------------------------------- launch scripts

def test_fixture_slurm_script():
    [launch] = read_launch_script(str(LAUNCH / "train_llama3_70b.slurm"))
    assert (launch.module, launch.config, launch.line, launch.launcher) == ("llama3", "llama3_70b", 20, "srun torchrun")
    assert launch.display.endswith("train_llama3_70b.slurm:20::llama3_70b")
    got = [(o.path, o.value, o.position[1:]) for o in launch.overrides]
    assert got[:4] == [("parallelism.tensor_parallel_degree", 8, (25, 5)),
                       ("parallelism.pipeline_parallel_degree", 2, (26, 5)),
                       ("parallelism.num_pp_microbatches", 8, (27, 5)),         # $((PP * 4))
                       ("training.disable_cuda_graphs", True, (28, 5))]
    assert got[4][0] == "debug.seed" and isinstance(got[4][1], UnknownValue)     # $SEED: not in the script
    torchrun, sbatch = launch.hints
    assert (torchrun.world_size, torchrun.gpus_per_node, torchrun.nodes) == (64, 8, 8)
    assert "SLURM_NNODES=8" in torchrun.source and "#SBATCH --nodes" in torchrun.source
    assert (sbatch.world_size, sbatch.gpus_per_node, sbatch.nodes) == (None, 8, 8)
    assert any('"$@"' in n for n in launch.notes)


def test_fixture_sweep_script():
    launches = read_launch_script(str(LAUNCH / "sweep.sh"))
    assert [(l.launcher, l.line) for l in launches] == [("run_train.sh", 7), ("torchrun", 10), ("python", 14),
                                                        ("torchrun", 25)]
    rt, tr, fake, loop = launches
    assert rt.hints[0].world_size == 8 and rt.overrides[0].position[1:] == (7, 66)
    assert [(o.path, o.value) for o in tr.overrides] == [
        ("parallelism.data_parallel_shard_degree", 4), ("parallelism.tensor_parallel_degree", 2),
        ("compile.enable", True)]
    assert fake.hints[0].world_size == 32 and fake.hints[0].gpus_per_node is None
    assert isinstance(loop.overrides[0].value, UnknownValue) and "loop variable" in loop.overrides[0].value.reason


def test_fixture_script_with_a_bad_launch_line():
    bad, good = read_launch_script(str(LAUNCH / "bad_override.sh"))
    # refused unless the checkout (read later) defines the field: see test_tt_commits
    refusal = bad.overrides[0].refusal
    assert refusal.code == "ML006" and (refusal.line, refusal.col) == (4, 5)
    assert good.error is None and good.overrides[0].value == 8
    with pytest.raises(InputError):                      # the error travels with the overrides too
        apply_overrides(source(), bad.overrides)


@needs_checkout
def test_real_run_train_sh():
    python, torchrun = read_launch_script(str(TT_MAIN / "run_train.sh"))
    assert (python.line, torchrun.line) == (40, 45)
    assert (torchrun.module, torchrun.config) == ("llama3", "llama3_debugmodel")
    [hint] = torchrun.hints
    assert (hint.world_size, hint.gpus_per_node, hint.nodes) == (8, 8, 1)
    assert "NGPU=8 on line 29" in hint.source and "default" in hint.source
    assert torchrun.overrides == [] and any('"$@"' in n for n in torchrun.notes)
    mode, steps = python.overrides
    assert mode.path == "comm.mode" and not mode.known        # COMM_MODE is empty unless the environment sets it
    assert (steps.path, steps.value) == ("training.steps", 1)
    assert python.hints == []                                  # a plain python process: world unknown


@needs_checkout
def test_real_multinode_trainer_slurm():
    [launch] = read_launch_script(str(TT_MAIN / "multinode_trainer.slurm"))
    assert (launch.line, launch.module, launch.config) == (63, "llama3", "llama3_debugmodel")
    torchrun, sbatch = launch.hints
    assert (torchrun.world_size, torchrun.gpus_per_node, torchrun.nodes) == (32, 8, 4)
    assert (sbatch.gpus_per_node, sbatch.nodes) == (8, 4)     # --gpus-per-task=8 x (--ntasks=4 / --nodes=4)
    assert launch.facts["torchrun --rdzv-endpoint"] is None   # "$head_node_ip:29500": from $(srun ...)


def test_shell_features():
    text = r"""#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=8
#SBATCH --gres=gpu:h100:8
ARGS=(--parallelism.tensor_parallel_degree 4 --compile.enable)
EXTRA="--training.steps 7"
: ${CP:=2}
if [ -n "$X" ]; then TP=8; else TP=2; fi
export OVERRIDES='--parallelism.context_parallel_degree '"$CP"
srun python -m torchtitan.train --module llama3 --config llama3_8b "${ARGS[@]}" $EXTRA $OVERRIDES \
  --parallelism.pipeline_parallel_degree $TP 2>&1 | tee log.txt  # tee: not a launch
"""
    [launch] = launches_in_text(text, file="s.sbatch")
    got = [(o.path, o.value) for o in launch.overrides]
    assert got[:4] == [("parallelism.tensor_parallel_degree", 4), ("compile.enable", True), ("training.steps", 7),
                       ("parallelism.context_parallel_degree", 2)]
    assert got[4][0] == "parallelism.pipeline_parallel_degree" and "if/loop block" in got[4][1].reason
    srun_hint = launch.hints[0]                 # srun starts the trainer: its tasks are the ranks
    assert (srun_hint.world_size, srun_hint.gpus_per_node, srun_hint.nodes) == (16, 8, 2)
    assert launch.facts["#SBATCH --nodes"] == "2" and launch.facts["#SBATCH --gres"] == "gpu:h100:8"


@pytest.mark.parametrize("text, gres, count", [
    ("8", False, 8), ("h100:8", False, 8), ("gpu:8", True, 8), ("gpu:a100:4", True, 4), ("shard:2,gpu:4", True, 4),
    ("gpu", True, 1), ("gpu:8(S:0-1)", True, 8), ("mps:100", True, None),
])
def test_gpu_counts(text, gres, count):
    from meshlint.inputs.launch_commands import _gpu_count

    assert _gpu_count(text, gres) == count


def test_srun_options_over_the_allocation():
    text = ("#SBATCH --nodes=4\n#SBATCH --gpus-per-node=8\n"
            "srun --ntasks-per-node=8 python -m torchtitan.train --module m --config c\n"
            "srun -N1 -n2 python -m torchtitan.train --module m --config c\n")
    a, b = launches_in_text(text, file="job.sbatch")
    assert (a.hints[0].world_size, a.hints[0].gpus_per_node, a.hints[0].nodes) == (32, 8, 4)
    assert "in the allocation of --nodes=4" in a.hints[0].source
    assert (b.hints[0].world_size, b.hints[0].nodes) == (2, 1)
    assert (b.hints[1].world_size, b.hints[1].gpus_per_node) == (None, 8)     # the allocation: shape only


def test_runners_read_and_source():
    text = ("source ~/env.sh\nread TP\n"
            "uv run --python 3.11 torchrun -m torchtitan.train --module m --config c --parallelism.tensor_parallel_degree $TP\n"
            "conda run -n tt python -m torchtitan.train --module m --config d\n")
    a, b = launches_in_text(text, file="x.sh")
    assert not a.overrides[0].known and "read from input" in a.overrides[0].value.reason
    assert any("source ~/env.sh" in n for n in a.notes) and b.config == "d"


def test_sbatch_directives_after_the_first_command_are_ignored():
    text = "#!/bin/bash\necho hi\n#SBATCH --nodes=64\ntorchrun -m torchtitan.train --module m --config c\n"
    [launch] = launches_in_text(text, file="x.sh")
    assert len(launch.hints) == 1


# ----------------------------------------------------------------------------- hostile scripts

def _script(tmp_path, text, name="run.sh"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def test_too_large_and_long_lines(tmp_path):
    with pytest.raises(InputError) as err:
        read_launch_script(_script(tmp_path, "# torchtitan\n" + "x" * (2 << 20)))
    assert err.value.code == "ML007"
    with pytest.raises(InputError) as err:
        read_launch_script(_script(tmp_path, "torchrun -m torchtitan.train " + "a" * 40_000 + "\n"))
    assert err.value.code == "ML007" and err.value.line == 1


def test_fifo_is_refused_unread(tmp_path):
    fifo = tmp_path / "run.sh"
    os.mkfifo(fifo)
    result = {}

    def read():
        try:
            read_launch_script(str(fifo))
        except InputError as exc:
            result["error"] = exc

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "reading a FIFO blocked"
    assert result["error"].code == "ML001" and "FIFO" in result["error"].message


def test_binary_and_bad_encoding(tmp_path):
    assert read_launch_script(_script(tmp_path, b"\x00\x01\x02 no launch here")) == []
    with pytest.raises(InputError) as err:
        read_launch_script(_script(tmp_path, b"torchrun -m torchtitan.train\x00"))
    assert err.value.code == "ML002"
    with pytest.raises(InputError) as err:
        read_launch_script(_script(tmp_path, "torchrun -m torchtitan.train --config caf\xe9\n".encode("latin-1")))
    assert err.value.code == "ML002"
    assert read_launch_script(_script(tmp_path, "\xe9cho\n".encode("latin-1"))) == []   # not ours: skipped


def test_missing_and_directory(tmp_path):
    for path in (str(tmp_path / "nope.sh"), str(tmp_path)):
        with pytest.raises(InputError) as err:
            read_launch_script(path)
        assert err.value.code == "ML001"


def test_deeply_continued_line_is_bounded(tmp_path):
    text = "torchrun -m torchtitan.train --module m --config c \\\n" + " --training.steps 1 \\\n" * 20_000 + "\n"
    start = time.process_time()
    [launch] = read_launch_script(_script(tmp_path, text))
    assert time.process_time() - start < 5
    assert launch.error is not None and launch.error.code == "ML007"     # over MAX_ARGS words


def test_many_launch_lines_are_bounded(tmp_path):
    text = "torchrun -m torchtitan.train --module m --config c\n" * 300
    with pytest.raises(InputError) as err:
        read_launch_script(_script(tmp_path, text))
    assert err.value.code == "ML007"


def test_exploding_variables_and_nesting(tmp_path):
    text = "X=a\n" + 'X="$X$X"\n' * 60 + "torchrun -m torchtitan.train --module m --config c --debug.save_config_file $X\n"
    start = time.process_time()
    [launch] = read_launch_script(_script(tmp_path, text))
    assert time.process_time() - start < 5 and not launch.overrides[0].known
    deep = "torchrun -m torchtitan.train --module m --config " + "$(" * 10_000 + "\n"
    with pytest.raises(InputError) as err:
        read_launch_script(_script(tmp_path, deep))
    assert err.value.code == "ML007"
    braces = "torchrun -m torchtitan.train --module m --config ${A:-${B:-${C:-x}}}\n"
    [launch] = read_launch_script(_script(tmp_path, braces))
    assert launch.config == "x"


def test_garbage_never_raises_anything_but_input_errors():
    import random

    rng = random.Random(7)
    alphabet = list("torchrun -m torchtitan.train --module x --config y $(){}[]\"'`\\\n#;&|<>=:@*!?-_ \t") + ["$@", "<<E",
                                                                                                           "\nE\n"]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        try:
            launches_in_text("torchrun -m torchtitan.train " + text)
        except InputError:
            pass


def test_unterminated_quotes_and_heredocs():
    # bash refuses an unterminated quote; meshlint reads to the end and names no config
    assert all(l.error is not None for l in launches_in_text("torchrun -m torchtitan.train --module 'x --config y\n"))
    text = "cat <<'EOF'\ntorchrun -m torchtitan.train --module m --config c\nEOF\n"
    assert launches_in_text(text) == []
    text = "cat <<-EOF\n\ttorchrun -m torchtitan.train --module m --config c\n\tEOF\ntorchrun -m torchtitan.train " \
           "--module m --config d\n"
    [launch] = launches_in_text(text)
    assert launch.config == "d" and launch.line == 4


# ----------------------------------------------------------------------------- saved configs

def test_saved_config():
    path = LAUNCH / "job_config.json"
    src = read_saved_config(str(path))
    assert src.path == str(path) and src.unknown == {}
    assert src.data["model"] == {"name": "llama3", "flavor": "debugmodel"}
    assert "model_spec" not in src.data and src.model_config["dim"] == 256
    assert src.data["parallelism"]["tensor_parallel_degree"] == 2
    assert src.data["training"]["disable_cuda_graphs"] is True
    lines = path.read_text().splitlines()
    line, col = src.locate("parallelism.tensor_parallel_degree")
    assert lines[line - 1][col - 1:].startswith('"tensor_parallel_degree": 2')
    line, col = src.locate("model.flavor")
    assert lines[line - 1][col - 1:].startswith('"flavor": "debugmodel"')
    assert src.has_key("parallelism.context_parallel_degree")        # everything is written out
    line, col = src.locate("optimizer.param_groups[0].optimizer_kwargs.lr")
    assert lines[line - 1][col - 1:].startswith('"lr"')


def test_saved_config_is_checked_end_to_end(tmp_path):
    from meshlint.engine.check import Options, check_all
    from meshlint.engine.ruleset import load_rules

    reports = check_all(str(LAUNCH / "job_config.json"), Options(rules=load_rules(), torchtitan_version=MAIN))
    [report] = reports
    assert report.status == "checked", report.error
    assert (report.resolution.degrees["tp"], report.resolution.degrees["dp_shard"]) == (2, 4)
    assert report.spec.framework["version"] == MAIN


@pytest.mark.parametrize("text, code", [
    ("{", "ML006"), ("[]", "ML006"), ('{"training": {}}', "ML006"), ("[" * 100 + "]" * 100, "ML007"),
])
def test_saved_config_refusals(tmp_path, text, code):
    with pytest.raises(InputError) as err:
        read_saved_config(_script(tmp_path, text, "c.json"))
    assert err.value.code == code


def test_saved_config_binary(tmp_path):
    with pytest.raises(InputError) as err:
        read_saved_config(_script(tmp_path, b'{"parallelism": {}}\x00', "c.json"))
    assert err.value.code == "ML002"


# ----------------------------------------------------------------------------- finding the checkout

def _fake_checkout(base: Path, raise_on_import: bool = False) -> Path:
    for sub in ("config", "models"):
        (base / "torchtitan" / sub).mkdir(parents=True, exist_ok=True)
    body = "raise RuntimeError('imported!')\n" if raise_on_import else ""
    (base / "torchtitan" / "__init__.py").write_text(body)
    return base


def test_find_root_explicit(tmp_path):
    root = _fake_checkout(tmp_path / "tt")
    assert find_root(explicit=str(root))[0] == str(root)
    assert find_root(explicit=str(root / "torchtitan"))[0] == str(root)
    found, why = find_root(explicit=str(tmp_path / "missing"))
    assert found is None and "not a directory" in why
    found, why = find_root(explicit=str(tmp_path))
    assert found is None and "no torchtitan/config/" in why


def test_find_root_walks_up(tmp_path):
    root = _fake_checkout(tmp_path / "repo")
    deep = root / "torchtitan" / "models" / "llama3"
    deep.mkdir(parents=True)
    found, how = find_root(str(deep))
    assert found == str(root) and "checkout" in how



def test_a_folder_s_checkout_is_found_once_and_the_cache_stays_bounded(tmp_path, monkeypatch):
    """ttroot.checkout_of: the checkout a config belongs to, found and identified once per folder for every reader
    of it (a TOML config's version, a registry's), and the per-folder cache cleared when it reaches its bound."""
    from meshlint.inputs import ttroot

    root = _fake_checkout(tmp_path / "repo")
    config = root / "train_configs" / "a.toml"
    config.parent.mkdir()
    monkeypatch.setattr(ttroot, "_CHECKOUTS", {})
    calls = []
    real = ttroot.find_root
    monkeypatch.setattr(ttroot, "find_root", lambda *a: calls.append(a) or real(*a))
    first = ttroot.checkout_of(str(config))
    assert first[0] == str(root) and first[2] is not None and first[2][0] is None  # found; its code is no version
    assert ttroot.checkout_of(str(config.parent / "b.toml")) is first and len(calls) == 1
    monkeypatch.setattr(ttroot, "_CHECKOUTS_MAX", 2)
    ttroot.checkout_of(str(tmp_path / "x.toml"))
    ttroot.checkout_of(str(tmp_path / "y" / "z.toml"))
    assert len(ttroot._CHECKOUTS) <= 2 and len(calls) == 3

def test_find_root_locates_the_installed_package_without_importing_it(tmp_path):
    site = _fake_checkout(tmp_path / "site", raise_on_import=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from meshlint.inputs.ttroot import find_root\n"
            "root, how = find_root(%r)\n"
            "assert 'torchtitan' not in sys.modules, 'imported'\n"
            "print(root); print(how)\n") % (str(site), str(elsewhere))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(elsewhere),
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.returncode == 0, out.stderr
    root, how = out.stdout.splitlines()
    assert root == str(site) and "without importing" in how


def test_find_root_none(tmp_path):
    code = ("import sys\nfrom meshlint.inputs.ttroot import find_root\n"
            "sys.path[:] = [p for p in sys.path if 'site-packages' in p or 'lib/python' in p]\n"
            "print(find_root(%r))\n") % str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "None" in out.stdout or "torchtitan" in out.stdout   # an installed torchtitan may exist


def test_no_heavy_imports():
    code = ("import sys\nfrom meshlint.inputs import launch, scripts, ttroot\n"
            "bad = [m for m in ('torch', 'tyro', 'torchtitan') if m in sys.modules]\nprint(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]", out.stderr
