"""Accelerate 1.15.0: a ``ParallelismConfig`` read and resolved as the release builds its DeviceMesh.

Mirrored from the release's code (accelerate/parallelism_config.py, accelerator.py, commands/launch.py,
utils/launch.py; the keys, distributed types and flags are generated into facts-1.15.0.toml):

* values: the launcher copies ``parallelism_config:`` of the YAML (or ``--parallelism_config_*`` flags) onto
  its arguments and passes them to the ranks as ``PARALLELISM_CONFIG_*`` strings (``str(value)``), which
  ``ParallelismConfig.__post_init__`` reads back with ``int()``; it does so only under the multi-GPU
  (FSDP included) and DeepSpeed launchers;
* ``__post_init__`` refuses, in this order: a size that ``int()`` cannot read, a cp_comm_strategy outside
  allgather/alltoall (cp > 1), sizes < 1 (dp_replicate, dp_shard, tp, cp), a cp_backend other than torch,
  sp < 1, an sp_backend other than deepspeed, cp and sp both > 1, tp or cp > 1 with dp_replicate > 1 and
  dp_shard == 1;
* ``Accelerator()`` builds the mesh first: no mesh when sp > 1 (DeepSpeed SP) or no size is > 1; else the
  dims with size > 1 in the order ``dp_replicate, dp_shard, cp, sp, tp`` (torch refuses a mesh larger than
  the world), flattened ``dp`` (dp_replicate, dp_shard), ``dp_shard_cp`` (dp_shard, cp) and ``dp_cp``
  (dp_replicate, dp_shard, cp), each when one of its parts is > 1;
* then ``_validate_accelerator``: a product of 1 on several processes becomes dp_replicate = num_processes
  (after the mesh was built: none is); the product must equal num_processes (not for DeepSpeed SP); FSDP2
  needs dp_shard or cp > 1; the distributed type must be FSDP2, multi-device or DeepSpeed.
"""

from __future__ import annotations

from math import prod

from meshlint.frameworks.base import Key, Resolution, Spec, axes_of, flattened, type_of
from meshlint.mesh.devmesh import Mesh

NAME = "accelerate"
VERSION = "1.15.0"
SECTION = "parallelism_config"
PREFIX = "parallelism_config_"
SIZES = ("dp_replicate", "dp_shard", "tp", "cp", "sp")      # total_size's factors, in its message's order
ORDER = ("dp_replicate", "dp_shard", "cp", "sp", "tp")      # _get_mesh's canonical order
FLATTENED = (("dp", ("dp_replicate", "dp_shard")), ("dp_shard_cp", ("dp_shard", "cp")),
             ("dp_cp", ("dp_replicate", "dp_shard", "cp")))
MULTI_DEVICE = ("MULTI_GPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_NPU", "MULTI_XPU", "MULTI_HPU",
                "MULTI_NEURON")
MULTI_GPU_LAUNCHER = MULTI_DEVICE + ("FSDP",)               # prepare_multi_gpu_env passes the config on
PASSES_CONFIG = MULTI_GPU_LAUNCHER + ("DEEPSPEED",)         # ... and prepare_deepspeed_cmd_env
CP_COMM = ("allgather", "alltoall")
SP_ATTN = ("flash_attention_2", "flash_attention_3", "sdpa")


def sp_attn_ok(attn: str) -> bool:
    """DeepSpeedSequenceParallelConfig's check: a built-in, or a Hub kernel ('org/...flash-attn...')."""
    return attn in SP_ATTN or ("/" in attn and "flash-attn" in attn)

KEYS = [
    Key(f"parallelism_config.{PREFIX}dp_replicate_size", "int", 1, "dp_replicate", doc="DDP/HSDP replicate size"),
    Key(f"parallelism_config.{PREFIX}dp_shard_size", "int", 1, "dp_shard", doc="FSDP shard size"),
    Key(f"parallelism_config.{PREFIX}tp_size", "int", 1, "tp", doc="tensor-parallel size"),
    Key(f"parallelism_config.{PREFIX}cp_size", "int", 1, "cp", doc="context-parallel size (FSDP2)"),
    Key(f"parallelism_config.{PREFIX}sp_size", "int", 1, "accelerate.sp", doc="DeepSpeed (ALST/Ulysses) SP size"),
    Key(f"parallelism_config.{PREFIX}cp_backend", "str", "torch", "accelerate.cp_backend"),
    Key(f"parallelism_config.{PREFIX}sp_backend", "str", "deepspeed", "accelerate.sp_backend"),
    Key(f"parallelism_config.{PREFIX}cp_comm_strategy", "str", "allgather", "accelerate.cp_comm_strategy"),
    Key(f"parallelism_config.{PREFIX}sp_seq_length", "str", None, None),
    Key(f"parallelism_config.{PREFIX}sp_seq_length_is_variable", "bool", True, None),
    Key(f"parallelism_config.{PREFIX}sp_attn_implementation", "str", "sdpa", "accelerate.sp_attn_implementation"),
]
SIZE_KEYS = {"dp_replicate": KEYS[0].path, "dp_shard": KEYS[1].path, "tp": KEYS[2].path, "cp": KEYS[3].path,
             "sp": KEYS[4].path}
_FACTS: list = []


def facts() -> dict:
    """The generated facts of this release (facts-1.15.0.toml), read once."""
    if not _FACTS:
        import os

        from meshlint import tomlfast

        _FACTS.append(tomlfast.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"facts-{VERSION}.toml")))
    return _FACTS[0]


def as_rank_reads(raw, kind: str):
    """(value, error): what a rank makes of a value the launcher passed through ``str()``."""
    text = str(raw)
    if kind == "int":
        try:
            return int(text), None
        except ValueError:
            return None, f"ValueError: invalid literal for int() with base 10: {text!r}"
    if kind == "bool":
        return text.lower() == "true", None
    return text, None


def new_spec() -> Spec:
    spec = Spec(dialect=NAME)
    spec.framework = {"name": NAME, "version": VERSION, "decided_by": None}
    return spec


def apply_values(spec: Spec, values: dict, where: dict, launcher: dict) -> None:
    """Fill ``spec`` from the ParallelismConfig values as strings or YAML scalars (``values``: key leaf without
    prefix -> raw value; ``where``: leaf -> key path for findings) and the launcher's settings
    (distributed_type, fsdp_version, num_processes, num_machines, source of each)."""
    v = spec.values
    for key in KEYS:
        leaf = key.leaf[len(PREFIX):]
        name = leaf.removesuffix("_size") if leaf.endswith("_size") else leaf
        present = leaf in values
        value, error = (as_rank_reads(values[leaf], key.type) if present else (key.default, None))
        if error:
            spec.problems.append({"key": where.get(leaf, key.path), "expected": "an integer",
                                  "actual": type_of(values[leaf]), "value": repr(values[leaf])[:60],
                                  "note": f"Accelerate passes it to the ranks as the string {str(values[leaf])!r}, "
                                          f"which ParallelismConfig reads with int(): {error}"})
            spec.load_error = spec.load_error or f"{error} (PARALLELISM_CONFIG_{leaf.upper()})"
        if name in SIZE_KEYS and name != "sp":
            spec.degrees[name] = value
            spec.degree_keys[name] = where.get(leaf, key.path)
            spec.degree_present[name] = present
        elif key.fact:
            v[key.fact] = value
    spec.degree_keys["sp"] = where.get("sp_size", SIZE_KEYS["sp"])
    spec.degrees.update(pp=1, ep=1, etp=None)  # Accelerate's ParallelismConfig has no pp/ep/etp
    dtype = launcher.get("distributed_type")
    fsdp_version = launcher.get("fsdp_version")
    v["accelerate.distributed_type"] = dtype
    v["accelerate.fsdp_version"] = fsdp_version
    v["accelerate.is_fsdp2"] = dtype == "FSDP" and str(fsdp_version) == "2"
    v["accelerate.config_reaches_ranks"] = dtype in PASSES_CONFIG if dtype is not None else None
    v["accelerate.num_processes"] = launcher.get("num_processes")
    v["accelerate.num_machines"] = launcher.get("num_machines")
    v["accelerate.keys"] = {**{n: where.get(f"{n}_size", SIZE_KEYS[n]) for n in SIZE_KEYS},
                            "distributed_type": launcher.get("distributed_type_key") or "distributed_type",
                            "num_processes": launcher.get("num_processes_key") or "num_processes",
                            "num_machines": launcher.get("num_machines_key") or "num_machines",
                            "gpu_ids": launcher.get("gpu_ids_key") or "gpu_ids",
                            "machine_rank": launcher.get("machine_rank_key") or "machine_rank",
                            "deepspeed_multinode_launcher": (launcher.get("deepspeed_multinode_launcher_key")
                                                             or launcher.get("num_machines_key") or "num_machines"),
                            "fsdp_version": (launcher.get("fsdp_version_key")
                                             or "fsdp_config.fsdp_version|distributed_type"),
                            "cp_comm_strategy": where.get("cp_comm_strategy", KEYS[7].path),
                            "cp_backend": where.get("cp_backend", KEYS[5].path),
                            "sp_backend": where.get("sp_backend", KEYS[6].path),
                            "sp_attn_implementation": where.get("sp_attn_implementation", KEYS[10].path)}
    _launcher_values(v, launcher, dtype)
    world = launched_world(launcher.get("num_processes"), launcher.get("num_machines"), dtype)
    v["accelerate.world"] = world
    v.setdefault("accelerate.section_present", True)  # a launch line or variables set it; a file says
    _value_problems(spec)
    if spec.load_error is None:
        spec.load_error = post_init_error(spec)


DEEPSPEED_MULTINODE_LAUNCHERS = ("pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm")  # constants.py:49


def _known(value):
    """A launcher setting as the rules see it: None when absent or not determined by the script."""
    return value if isinstance(value, (str, int, float, bool, list, tuple)) else None


def _launcher_values(v: dict, launcher: dict, dtype) -> None:
    """What the launcher does per machine (utils/launch.py): ``num_processes // num_machines`` processes on each
    machine under torchrun (:216-218, :489-490) or DeepSpeed's pdsh runner (``--num_gpus``, :476), the devices it
    makes visible (``gpu_ids`` -> CUDA_VISIBLE_DEVICES, :260-277 and :532-549), and the DeepSpeed multinode
    launcher (None -> 'pdsh', :448-450)."""
    processes, machines = launcher.get("num_processes"), launcher.get("num_machines")
    per_machine = None
    if isinstance(processes, int) and not isinstance(processes, bool) and processes >= 1 and \
            (dtype is None or dtype in PASSES_CONFIG):
        multi = isinstance(machines, int) and not isinstance(machines, bool) and machines > 1
        per_machine = processes // machines if multi else processes
    v["accelerate.per_machine"] = per_machine
    gpu_ids = _known(launcher.get("gpu_ids"))
    ids = [g.strip() for g in gpu_ids.split(",")] if isinstance(gpu_ids, str) and gpu_ids.strip() != "all" else None
    v["accelerate.gpu_ids"] = gpu_ids if ids else None
    v["accelerate.gpu_ids_count"] = len(ids) if ids else None
    v["accelerate.mixed_precision"] = _known(launcher.get("mixed_precision"))
    ds_launcher = launcher.get("deepspeed_multinode_launcher")
    v["accelerate.ds_launcher"] = _known(ds_launcher)
    v["accelerate.ds_launcher_given"] = ds_launcher is not None
    v["accelerate.ds_hostfile_given"] = launcher.get("deepspeed_hostfile") is not None
    rank = launcher.get("machine_rank")
    v["accelerate.machine_rank"] = rank if isinstance(rank, int) and not isinstance(rank, bool) else None
    v["accelerate.machine_rank_given"] = rank is not None
    # every node's launcher gets the same --machine_rank (the srun shell expanded $SLURM_PROCID once): it matters
    # where torchrun takes the node rank from it, the static rendezvous (utils/launch.py:219, :491 ->
    # torch/distributed/run.py: rdzv_configs["rank"] = node_rank only for "static")
    torchrun = dtype is None or dtype in MULTI_GPU_LAUNCHER or (dtype == "DEEPSPEED" and _known(ds_launcher) == "standard")
    # no config file (a checked YAML is one) and no --machine_rank: the launcher's machine_rank is None
    # (commands/launch.py:292; ClusterConfig's default 0 comes only with a file, config_args.py:181)
    v["accelerate.config_file_given"] = launcher.get("config_file_given", True)
    once = launcher.get("machine_rank_once")
    v["accelerate.machine_rank_once"] = once if torchrun and launcher.get("rdzv_backend", "static") == "static" \
        else None


# value checks of __post_init__ (and its handlers'), reported as invalid values (ML101): (fact, allowed, when)
CHOICES = (("accelerate.cp_backend", ("torch",), None), ("accelerate.sp_backend", ("deepspeed",), None),
           ("accelerate.cp_comm_strategy", CP_COMM, "cp"), )


def _value_problems(spec: Spec) -> None:
    v, keys = spec.values, spec.values["accelerate.keys"]
    for fact, allowed, needs in CHOICES:
        value = v.get(fact)
        gate = spec.degrees.get(needs) if needs else 2
        if value is not None and value not in allowed and isinstance(gate, int) and gate > 1:
            name = fact.split(".", 1)[1]
            spec.problems.append({"key": keys[name], "expected": "one of " + ", ".join(map(repr, allowed)),
                                  "actual": "string", "value": repr(value)[:60],
                                  "note": f"ParallelismConfig raises ValueError ({name} must be one of "
                                          f"{list(allowed)})"})
    attn, sp = v.get("accelerate.sp_attn_implementation"), v.get("accelerate.sp")
    if isinstance(sp, int) and sp > 1 and attn is not None and not sp_attn_ok(attn):
        spec.problems.append({"key": keys["sp_attn_implementation"],
                              "expected": f"one of {', '.join(map(repr, SP_ATTN))} or a Hub flash-attn kernel",
                              "actual": "string", "value": repr(attn), "note": "DeepSpeedSequenceParallelConfig "
                              "raises ValueError: Invalid sp_attn_implementation"})
    if isinstance(sp, int) and sp < 1:
        spec.problems.append({"key": keys["sp"], "expected": "an integer >= 1", "actual": "integer", "value": str(sp),
                              "note": f"ParallelismConfig raises ValueError: sp_size must be at least 1, but got {sp}"})


def launched_world(num_processes, num_machines, dtype) -> int | None:
    """How many processes the launcher starts: ``num_processes // num_machines`` per machine, on each machine."""
    if not isinstance(num_processes, int) or isinstance(num_processes, bool) or num_processes < 1:
        return None
    machines = num_machines if isinstance(num_machines, int) and not isinstance(num_machines, bool) else 1
    if machines > 1 and (dtype is None or dtype in PASSES_CONFIG):
        return (num_processes // machines) * machines
    return num_processes


def post_init_error(spec: Spec) -> str | None:
    """The first ValueError of ``ParallelismConfig.__post_init__`` (None when it constructs)."""
    d, v = spec.degrees, spec.values
    sizes = {n: d.get(n) for n in ("dp_replicate", "dp_shard", "tp", "cp")}
    sizes["sp"] = v.get("accelerate.sp")
    if any(s is None for s in sizes.values()):
        return None
    if sizes["cp"] > 1 and v.get("accelerate.cp_comm_strategy") not in CP_COMM:
        return (f"ValueError: Invalid cp_comm_strategy: {v.get('accelerate.cp_comm_strategy')}. "
                "Must be one of 'allgather' or 'alltoall'.")
    attn = v.get("accelerate.sp_attn_implementation")
    if sizes["sp"] > 1 and attn is not None and not sp_attn_ok(attn):
        return f"ValueError: Invalid sp_attn_implementation: {v.get('accelerate.sp_attn_implementation')}."
    for name in ("dp_replicate", "dp_shard", "tp", "cp"):
        if sizes[name] < 1:
            return f"ValueError: {name}_size must be at least 1, but got {sizes[name]}"
    if v.get("accelerate.cp_backend") != "torch":
        return f"ValueError: cp_backend must be one of ['torch'], but got {v.get('accelerate.cp_backend')}"
    if sizes["sp"] < 1:
        return f"ValueError: sp_size must be at least 1, but got {sizes['sp']}"
    if v.get("accelerate.sp_backend") != "deepspeed":
        return f"ValueError: sp_backend must be one of ['deepspeed'], but got {v.get('accelerate.sp_backend')}"
    if sizes["cp"] > 1 and sizes["sp"] > 1:
        return ("ValueError: Context Parallelism (CP) and Sequence Parallelism (SP) are mutually exclusive. "
                f"Got cp_size={sizes['cp']} and sp_size={sizes['sp']}.")
    if (sizes["tp"] > 1 or sizes["cp"] > 1) and sizes["dp_replicate"] > 1 and sizes["dp_shard"] == 1:
        return ("ValueError: Tensor/Context parallelism (tp/cp_size > 1) cannot be used with pure data "
                "parallelism (dp_replicate_size > 1 and dp_shard_size == 1).")
    return None


def mesh_layout(sizes: dict) -> tuple:
    """(dims, sizes) of ``_get_mesh``: the dims > 1 in the canonical order; ((), ()) when none."""
    dims = tuple(n for n in ORDER if sizes[n] > 1)
    return dims, tuple(sizes[n] for n in dims)


def flattened_dims(dims: tuple) -> list:
    """[(name, parts)] of the flattened meshes build_device_mesh makes, given the mesh's dims."""
    return [(name, tuple(p for p in parts if p in dims)) for name, parts in FLATTENED
            if any(p in dims for p in parts)]


def resolve(spec: Spec, world: int | None) -> Resolution:
    d = dict(spec.degrees)
    v = spec.values
    sp = v.get("accelerate.sp")
    res = Resolution(degrees=d)
    error = spec.load_error or post_init_error(spec)  # again: a search (meshlint suggest) changes the sizes
    if error:
        res.framework_error, res.error_stage = error, "load"
        return res
    sizes = {"dp_replicate": d["dp_replicate"], "dp_shard": d["dp_shard"], "tp": d["tp"], "cp": d["cp"], "sp": sp}
    total = prod(sizes.values())
    d["batch"] = d["dp_replicate"] * d["dp_shard"]
    d["fsdp"] = d["dp_shard"] * d["cp"]
    deepspeed_sp = v.get("accelerate.sp_backend") == "deepspeed" and sp > 1
    res.valid_worlds = ("multiple", 1) if total == 1 else ("exact", total)
    if world is None:
        if total == 1:
            return res
        world, res.world_implied = total, True
    res.world_used = world
    dims, shape = mesh_layout(sizes)
    if deepspeed_sp:
        res.notes.append(f"sp = {sp} with the DeepSpeed backend: Accelerate builds no DeviceMesh (DeepSpeed "
                         "makes its own sequence-parallel groups)")
    elif not dims:
        res.notes.append("no size is above 1: Accelerate builds no DeviceMesh")
    elif total > world:
        res.framework_error = (f"RuntimeError: Mesh should not be bigger than default world size {world}, but "
                               f"found {total} ranks! (init_device_mesh)")
        res.error_stage = "mesh"
        return res
    else:
        mesh = Mesh("device_mesh", dims, shape)
        res.meshes["device_mesh"] = mesh
        res.primary = "device_mesh"
        res.axes = axes_of(mesh)
        for name, parts in flattened_dims(dims):
            res.axes[name] = flattened(mesh, parts, name)
            res.submeshes.append((f"device_mesh[{list(parts)}]._flatten({name!r})", f"{name} of size "
                                  f"{prod(sizes[p] for p in parts)}"))
        if mesh.size < world:
            res.outside = (mesh.size, world - 1)
    error = accelerator_error(spec, sizes, world) if v.get("accelerate.section_present", True) else None
    if not v.get("accelerate.section_present", True):
        res.notes.append("no parallelism_config in the file: accelerate launch sets no PARALLELISM_CONFIG_* variables "
                         "(a script may still pass its own ParallelismConfig)")
        if v.get("accelerate.distributed_type") == "FSDP" and world > 1:
            # fsdp2_prepare_model passes mesh=None without a mesh (fully_shard then spans the world); FSDP1 gets
            # no process group: both shard over the default group, whatever the degrees above say
            version = 2 if v.get("accelerate.is_fsdp2") else 1
            res.notes.append(f"FSDP{version} without a ParallelismConfig shards over the default process group: "
                             f"all {world} ranks" + (" (HYBRID_SHARD strategies: within each node)" if version == 1 else ""))
    if error:
        res.framework_error, res.error_stage = error, "resolve"
    elif total == 1 and world > 1 and _multi_device(v, world):
        res.degrees["dp_replicate"] = world
        res.notes.append(f"all sizes are 1 on {world} processes: _validate_accelerator sets dp_replicate_size = "
                         f"{world} (plain DDP), after the (empty) mesh was built")
    return res


def _multi_device(v: dict, world: int) -> bool:
    return v.get("accelerate.distributed_type") in MULTI_DEVICE and world > 1


def accelerator_error(spec: Spec, sizes: dict, world: int) -> str | None:
    """The first ValueError of ``ParallelismConfig._validate_accelerator`` on ``world`` processes."""
    v = spec.values
    total = prod(sizes.values())
    if not _multi_device(v, world) and total == 1:
        return None
    if total == 1:
        sizes = {**sizes, "dp_replicate": world}
        total = world
    if not (v.get("accelerate.sp_backend") == "deepspeed" and sizes["sp"] > 1) and total != world:
        return (f"ValueError: ParallelismConfig total_size ({total}) does not match num_processes ({world}). "
                "Please adjust dp_replicate_size/ dp_shard_size/tp_size/cp_size/sp_size.")
    is_fsdp2 = v.get("accelerate.is_fsdp2")
    if is_fsdp2 and sizes["dp_shard"] <= 1 and sizes["cp"] <= 1:
        return ("ValueError: FSDP is enabled but the parallelism config has no dimension for FSDP to shard "
                "across (both `dp_shard_size` and `cp_size` are 1).")
    dtype = v.get("accelerate.distributed_type")
    if dtype is not None and total > 1 and not (is_fsdp2 or _multi_device(v, world) or dtype == "DEEPSPEED"):
        return ("ValueError: ParallelismConfig is only compatible DistributedType.FSDP (version 2) or "
                f"DistributedType.Multi{{Device}} or DistributedType.DEEPSPEED, but got DistributedType.{dtype}.")
    return None
