"""torchtitan v0.1.0 (tag v0.1.0 = f7084fc78, 2025-06-17; the 0.1.0 wheel): ``[parallelism]`` TOML configs
read and resolved as it does.

What differs from v0.2.x (meshlint/frameworks/torchtitan/v0_2.py, whose reading and ParallelDims arithmetic
this module reuses):
* the config is ``torchtitan/config_manager.py`` (JobConfig and ConfigManager in one module), and
  ``ConfigManager._dict_to_dataclass`` (:805-818) copies only the fields each class has: an unknown key or
  section is dropped without a word (0.2.x refuses it). meshlint reports those as ML116 warnings;
* no expert parallelism: ``ParallelDims`` (torchtitan/distributed/parallel_dims.py:19-27) has dp_replicate,
  dp_shard, cp, tp, pp, world_size and enable_loss_parallel only;
* its keys: ``training.compile`` (not [compile] enable), no ``training.dtype`` (fp32 master weights),
  ``pipeline_parallel_split_points`` (no first/last-stage-less-layers), ``model.name``/``flavor`` default to
  "llama3"/"debugmodel", ``[float8]`` and ``[mx]`` at the top level, ``checkpoint.enable_checkpoint``;
* ``build_mesh`` (parallel_dims.py:54-106): ONE world mesh of the dims whose degree is > 1, in the order
  (pp, dp_replicate, dp_shard, cp, tp), then three flattened 1-D meshes when their dims exist: ``dp``
  (dp_replicate, dp_shard: the dataloader's and the batch's), ``dp_shard_cp`` (dp_shard, cp: FSDP's) and
  ``dp_cp`` (dp_replicate, dp_shard, cp: the loss all-reduce). There is no get_optional_mesh.

Facts (file:line at v0.1.0):
  config_manager.py:97, :100   model.name = "llama3", model.flavor = "debugmodel"
  config_manager.py:199-207    local_batch_size = 8, global_batch_size = -1, seq_len = 2048
  config_manager.py:235        training.compile = False
  config_manager.py:258-358    the [parallelism] keys below, with their defaults
  parallel_dims.py:32-51       _validate: degrees >= 1 but dp_shard; dp_shard -1 or >= 1; -1 -> floor
                               world // (dp_replicate*cp*tp*pp); assert dp_shard >= 1; the product assert
  train.py:86-94               ParallelDims(..., enable_loss_parallel=not disable_loss_parallel)
  train.py:98-102              dp_degree = world_mesh["dp"].size() when dp is enabled, else 1
  distributed/pipeline.py:27-121  generate_split_points (used when pipeline_parallel_split_points is empty)
"""

from __future__ import annotations

from meshlint.frameworks.base import Key, Resolution, Spec, flattened
from meshlint.frameworks.torchtitan import v0_2
from meshlint.frameworks.torchtitan.v0_2 import attach_model  # noqa: F401 - the same model table and lookup
from meshlint.mesh.devmesh import Mesh

NAME = "torchtitan"
SECTION = "parallelism"
STRICT_SECTIONS = v0_2.STRICT_SECTIONS
VERSION = "0.1.0"
COMMIT = "f7084fc78"
DATE = "2025-06-17"
FACTORS = v0_2.FACTORS  # dp_replicate, dp_shard, cp, tp, pp: its assert message's order
MESH_ORDER = ("pp", "dp_replicate", "dp_shard", "cp", "tp")  # build_mesh's (parallel_dims.py:57-58)
# build_mesh's flattened meshes: name -> the world mesh dims it flattens (those of them that exist)
FLATTENED = {"dp": ("dp_replicate", "dp_shard"), "dp_shard_cp": ("dp_shard", "cp"),
             "dp_cp": ("dp_replicate", "dp_shard", "cp")}

P = "parallelism."
SHORT_NAMES = {k: v for k, v in v0_2.SHORT_NAMES.items() if k not in ("ep", "etp")}
KEYS = [
    Key(P + "data_parallel_replicate_degree", "int", 1, "dp_replicate"),
    Key(P + "data_parallel_shard_degree", "int", -1, "dp_shard"),
    Key(P + "tensor_parallel_degree", "int", 1, "tp"),
    Key(P + "pipeline_parallel_degree", "int", 1, "pp"),
    Key(P + "context_parallel_degree", "int", 1, "cp"),
    Key(P + "pipeline_parallel_schedule", "str", "1F1B", "pp_schedule"),
    Key(P + "pipeline_parallel_microbatch_size", "int", 1, "pp_microbatch_size"),
    Key(P + "pipeline_parallel_layers_per_stage", "int", None, "pp_layers_per_stage"),
    Key(P + "pipeline_parallel_split_points", "array", [], "pp_split_points"),
    Key(P + "enable_async_tensor_parallel", "bool", False, "async_tp"),
    Key(P + "enable_compiled_autograd", "bool", False, None),
    Key(P + "fsdp_reshard_after_forward", "str", "default", None, ("default", "always", "never")),
    Key(P + "disable_loss_parallel", "bool", False, None),
    Key(P + "pipeline_parallel_schedule_csv", "str", "", None),
    Key(P + "context_parallel_rotate_method", "str", "allgather", None, ("allgather", "alltoall")),
    Key("model.name", "str", "llama3", "model.name"),
    Key("model.flavor", "str", "debugmodel", "model.flavor"),
    Key("training.local_batch_size", "int", 8, "training.local_batch_size"),
    Key("training.global_batch_size", "int", -1, "training.global_batch_size"),
    Key("training.seq_len", "int", 2048, "training.seq_len"),
    Key("training.compile", "bool", False, "compile.enable"),  # the fact the rules read for "compiled"
]
DEGREE_KEYS = {k.fact: k.path for k in KEYS if k.fact in FACTORS}
_VALIDATED = ("dp_replicate", "cp", "tp", "pp")  # _validate's loop (parallel_dims.py:39-40)


def read(source) -> Spec:
    spec = v0_2.read_toml(source, KEYS, DEGREE_KEYS, SHORT_NAMES, _VALIDATED)
    # the embedding and the output weigh one layer each in the split (generate_split_points' input_weight and
    # output_weight, pipeline.py:31-32, which the llama3 pipeline leaves at their defaults): 0.2.x's keys' facts
    spec.values["pp_first_stage_less_layers"] = spec.values["pp_last_stage_less_layers"] = 1
    return spec


def spec_from_degrees(degrees: dict, **other_values) -> Spec:
    return v0_2.toml_spec_from_degrees(read, KEYS, DEGREE_KEYS, VERSION, degrees, **other_values)


def bytes_per_param(spec: Spec) -> int | None:
    """FP32 master weights, gradients and AdamW moments: v0.1.0 has no training.dtype to lower them."""
    return 16


def pipeline_plan(spec: Spec, res: Resolution) -> dict:
    """As v0.2.x's with input and output weights 1 (generate_split_points' defaults, which the llama3 pipeline
    passes), when torchtitan splits the model itself; split points written in the file, or
    pipeline_parallel_layers_per_stage (a rigid fit with asserts of its own, pipeline.py:68-89), leave the
    split unmodelled: only the schedule and the microbatches are judged then."""
    from meshlint.mesh import pipeline

    v = spec.values
    own_split = bool(v.get("pp_split_points")) or v.get("pp_layers_per_stage") is not None
    plan = pipeline.torchtitan(res.degrees.get("pp"), None if own_split else v.get("model.n_layers"),
                               v.get("pp_schedule"), None, 1, 1, v.get("training.local_batch_size"),
                               v.get("pp_microbatch_size"))
    error = plan.get("split_error") or ""
    if error.startswith("ValueError: Number of stages"):  # the same test, in v0.1.0's words (pipeline.py:94-97)
        plan["split_error"] = ("ValueError: The number of total stages cannot be greater than the number of "
                               "effective layers.")
    elif "exceeds minimum layers per stage" in error:  # pipeline.py:102
        plan["split_error"] = "AssertionError: num_layers_per_stage >= max(input_weight, output_weight)"
    return plan


def resolve(spec: Spec, world: int | None) -> Resolution:
    res, world = v0_2.settle(spec, world, FACTORS)
    if world is None:
        return res
    d = res.degrees
    kept = [n for n in MESH_ORDER if d[n] > 1]
    mesh = Mesh("world", tuple(kept), tuple(d[n] for n in kept))
    res.meshes = {"world": mesh}
    res.primary = "world"
    res.axes = {n: mesh.axis(n) for n in kept}
    for name, dims in FLATTENED.items():
        present = tuple(n for n in dims if n in kept)
        if present:
            res.axes[name] = flattened(mesh, present, name)
    d.update(batch=d["dp_replicate"] * d["dp_shard"], fsdp=d["dp_shard"] * d["cp"])
    res.notes.append(f"one world mesh of the degrees > 1, in the order (pp, dp_replicate, dp_shard, cp, tp): "
                     f"{'(' + ', '.join(f'{n}={d[n]}' for n in kept) + ')' if kept else '() (every degree is 1)'}")
    res.notes.append(f"dp = dp_replicate·dp_shard = {d['batch']} (the dataloader's ranks); dp_shard_cp = dp_shard·cp "
                     f"= {d['fsdp']} (FSDP); dp_cp = {d['batch'] * d['cp']} (the loss all-reduce): each flattened "
                     "from the world mesh when one of its dims is > 1")
    res.submeshes = [(f'world_mesh["{n}"]', f"{res.axes[n].size} ranks" if n in res.axes else "KeyError (not built)")
                     for n in MESH_ORDER + tuple(FLATTENED)]
    return res
