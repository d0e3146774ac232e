"""The cost model ``meshlint suggest`` ranks valid layouts with (every formula and default: docs/cost-model.md).

For one layout it estimates, per GPU and per iteration (one forward and backward over
the local batch of every data-parallel rank):

* **memory**: model states as rule ML504 estimates them (parameters × bytes per
  parameter / (pp·tp·fsdp)), plus activations where the config gives the sequence
  length and microbatch, and whether that fits ``--gpu-memory-gib``;
* **compute**: 6·N_active + 12·L·s·H·Q FLOPs per token (PaLM, appendix B) at a
  fraction of the GPU's peak, ×4/3 with full activation recomputation;
* **communication**, each collective priced with an alpha-beta model
  (``steps·alpha + bytes/bandwidth``, ring algorithms) on the link it runs on: NVLink
  when the group stays inside a node, the inter-node fabric otherwise, decided by
  ``meshlint.mesh.devmesh.place`` on the framework's own mesh layout: TP (all-gather +
  reduce-scatter of activations per layer), CP (ring exchange of K/V), EP (all-to-all
  dispatch and combine per MoE layer), FSDP (all-gather of parameters, reduce-scatter
  of gradients), HSDP/DDP (all-reduce of gradient shards), PP (point-to-point
  activations at stage boundaries). FSDP and replicate traffic overlap with compute
  (only what exceeds it counts); TP, CP, EP and PP are on the critical path;
* **bubble**: the schedule's idle fraction for its microbatch count.

Layouts are ranked by time per token (iteration time / tokens the whole world
processes per iteration), so layouts with different batch degrees compare fairly.
Nothing here imports torch; all of it is arithmetic on the config's facts.
"""

from __future__ import annotations

from meshlint.record import Record
from meshlint.mesh.devmesh import Axis, place

GIB = 2 ** 30
DEFAULT_OVERLAP = 0.5       # FSDP traffic hides behind half the compute time (docs/cost-model.md: calibration)


class Link(Record):
    bandwidth: float     # GB/s per GPU, one direction (what a ring moves per GPU per second)
    latency_us: float    # per ring step (alpha)


class Cluster(Record):
    """A node type on a fabric (the seed's HardwareTopology, with the numbers an alpha-beta model needs)."""

    node: str
    fabric: str
    gpus_per_node: int
    gpu_tflops: float             # dense bf16 peak per GPU
    gpu_memory_gib: float
    intra: Link                   # inside a node
    inter: Link                   # between nodes, per GPU
    compute_efficiency: float     # achieved fraction of the peak on the model's GEMMs
    activation_checkpointing: str | None = None  # full | selective | none; None: what the config says
    overlap: float = DEFAULT_OVERLAP  # fraction of the compute time FSDP/HSDP traffic can hide behind


# Node presets (docs/cost-model.md cites each number).
NODES = {
    # H100 SXM: 989 TFLOPS dense bf16, 80 GB, NVLink 4 at 900 GB/s bidirectional = 450 GB/s each way
    "8xH100": {"gpus_per_node": 8, "gpu_tflops": 989.0, "gpu_memory_gib": 80 * 1e9 / GIB,
               "intra_node_bandwidth": 450.0, "intra_node_latency_us": 3.0},
    # H200 SXM: the H100's compute and NVLink, 141 GB
    "8xH200": {"gpus_per_node": 8, "gpu_tflops": 989.0, "gpu_memory_gib": 141 * 1e9 / GIB,
               "intra_node_bandwidth": 450.0, "intra_node_latency_us": 3.0},
    # 4-GPU H100/H200 boards (HGX 4-GPU, GH200 NVL): NVLink 4 between all four
    "4xH100": {"gpus_per_node": 4, "gpu_tflops": 989.0, "gpu_memory_gib": 80 * 1e9 / GIB,
               "intra_node_bandwidth": 450.0, "intra_node_latency_us": 3.0},
    "4xH200": {"gpus_per_node": 4, "gpu_tflops": 989.0, "gpu_memory_gib": 141 * 1e9 / GIB,
               "intra_node_bandwidth": 450.0, "intra_node_latency_us": 3.0},
    # A100 SXM 80 GB: 312 TFLOPS dense bf16, NVLink 3 at 600 GB/s bidirectional
    "8xA100": {"gpus_per_node": 8, "gpu_tflops": 312.0, "gpu_memory_gib": 80 * 1e9 / GIB,
               "intra_node_bandwidth": 300.0, "intra_node_latency_us": 4.0},
    "4xA100": {"gpus_per_node": 4, "gpu_tflops": 312.0, "gpu_memory_gib": 80 * 1e9 / GIB,
               "intra_node_bandwidth": 300.0, "intra_node_latency_us": 4.0},
}
# Fabric presets: per-GPU bandwidth between nodes (one NIC per GPU unless said) and the per-step latency.
FABRICS = {
    "infiniband-ndr": {"inter_node_bandwidth": 50.0, "inter_node_latency_us": 8.0},    # 400 Gb/s per GPU
    "infiniband-hdr": {"inter_node_bandwidth": 25.0, "inter_node_latency_us": 8.0},    # 200 Gb/s per GPU
    "roce-400": {"inter_node_bandwidth": 50.0, "inter_node_latency_us": 12.0},         # 400 GbE RoCE per GPU
    "ethernet-100": {"inter_node_bandwidth": 12.5, "inter_node_latency_us": 30.0},     # 100 GbE per GPU
}
DEFAULT_FABRIC = "infiniband-ndr"
DEFAULT_EFFICIENCY = 0.55   # KempnerForge's single-GPU 7B reaches 57.8 % MFU (mfu_scaling.md, row 1)
CLUSTER_KEYS = {"node": str, "fabric": str, "gpus_per_node": int, "gpu_tflops": (int, float),
                "gpu_memory_gib": (int, float), "intra_node_bandwidth": (int, float),
                "intra_node_latency_us": (int, float), "inter_node_bandwidth": (int, float),
                "inter_node_latency_us": (int, float), "compute_efficiency": (int, float),
                "activation_checkpointing": str, "overlap": (int, float)}
AC_MODES = ("full", "selective", "none")
LOOPED = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")  # 2 stages per rank


V_SHAPED = ("ZBVZeroBubble", "DualPipeV")  # rank r holds stages r and 2·pp−1−r: the turn of the V is local


def pp_sends(pp: int, schedule: str | None) -> int:
    """Point-to-point sends per microbatch of the busiest pipeline rank: each stage it holds sends its activations
    forward unless it is the last stage and its gradients backward unless it is the first, except between two
    stages on the same rank. 1F1B/GPipe: 2 with a middle stage (pp > 2), else 1; looped schedules (stages r and
    r + pp): 4, or 3 at pp = 2; V schedules: 4, or 2 at pp = 2."""
    if pp <= 1:
        return 0
    if (schedule or "") in V_SHAPED:
        return 4 if pp > 2 else 2
    if (schedule or "") in LOOPED:
        return 4 if pp > 2 else 3
    return 2 if pp > 2 else 1


def default_node(gpus_per_node: int | None) -> str:
    return "4xH100" if gpus_per_node == 4 else "8xH100"


def cluster(settings: dict | None = None, gpus_per_node: int | None = None) -> Cluster:
    """The cluster profile: a node preset and a fabric preset, then any number overridden.

    ``settings`` is ``[tool.meshlint.cluster]`` (already checked by meshlint.cli.project_config).
    """
    if not settings:  # the defaults: one immutable profile per node size, built once per process
        hit = _DEFAULT_CLUSTERS.get(gpus_per_node)
        if hit is None:
            hit = _DEFAULT_CLUSTERS[gpus_per_node] = _cluster({}, gpus_per_node)
        return hit
    return _cluster(settings, gpus_per_node)


_DEFAULT_CLUSTERS: dict = {}


def _cluster(settings: dict, gpus_per_node: int | None) -> Cluster:
    s = dict(settings)
    node = s.get("node") or default_node(s.get("gpus_per_node") or gpus_per_node)
    fabric = s.get("fabric") or DEFAULT_FABRIC
    merged = {**NODES.get(node, NODES["8xH100"]), **FABRICS.get(fabric, FABRICS[DEFAULT_FABRIC])}
    merged.update({k: v for k, v in s.items() if k not in ("node", "fabric")})
    gpn = gpus_per_node or merged["gpus_per_node"]
    return Cluster(node, fabric, gpn, float(merged["gpu_tflops"]), float(merged["gpu_memory_gib"]),
                   Link(float(merged["intra_node_bandwidth"]), float(merged["intra_node_latency_us"])),
                   Link(float(merged["inter_node_bandwidth"]), float(merged["inter_node_latency_us"])),
                   float(merged.get("compute_efficiency", DEFAULT_EFFICIENCY)),
                   merged.get("activation_checkpointing"), float(merged.get("overlap", DEFAULT_OVERLAP)))


def check_cluster(table) -> str | None:
    """What is wrong with a ``[tool.meshlint.cluster]`` table, or None."""
    if not isinstance(table, dict):
        return "must be a table"
    for key, value in table.items():
        want = CLUSTER_KEYS.get(key)
        if want is None:
            return f"unknown key {key!r} (known: {', '.join(CLUSTER_KEYS)})"
        if not isinstance(value, want) or isinstance(value, bool):
            return f"{key} has the wrong type"
        if key == "node" and value not in NODES:
            return f"node {value!r} is not one of {', '.join(NODES)}"
        if key == "fabric" and value not in FABRICS:
            return f"fabric {value!r} is not one of {', '.join(FABRICS)}"
        if key == "activation_checkpointing" and value not in AC_MODES:
            return f"activation_checkpointing {value!r} is not one of {', '.join(AC_MODES)}"
        if not isinstance(value, str) and not (0 < value <= 1e7):
            return f"{key} must be a positive number"
        if key == "compute_efficiency" and value > 1:
            return "compute_efficiency is a fraction of the peak (0 < x <= 1)"
        if key == "overlap" and value > 1:
            return "overlap is a fraction of the compute time (0 < x <= 1)"
    return None


# ----------------------------------------------------------------------------- the workload

class Workload(Record):
    """The config's model and batch, as the cost model needs them (None: unknown)."""

    framework: str
    params: int | None            # total parameters
    expert_params: int            # parameters of the routed experts (0 for dense models)
    active_params: int | None     # per token
    n_layers: int | None
    moe_layers: int
    dim: int | None
    attn_dim: int | None          # heads × head_dim
    kv_dim: int | None            # kv heads × head_dim
    top_k: int
    vocab: int | None             # vocabulary (the logits' width)
    seq_len: int | None           # tokens of one sequence (attention span, CP splits it)
    batch: tuple                  # ((tokens per microbatch, microbatches) with pp > 1, (the same) without pp),
    #                               per data-parallel rank and iteration; None where unknown
    schedule: str | None          # pipeline schedule (torch name)
    bytes_per_param: int | None   # model states (ML504)
    param_bytes: int              # bytes of a parameter on the wire and of an activation (bf16 unless fp32)
    ac: str                       # activation checkpointing: full | selective | none
    ac_from: str                  # where that came from
    notes: tuple = ()
    shape: object = None          # meshlint.mesh.memory.Shape: what the whole-peak memory estimate reads


def workload(report, options, profile: Cluster) -> Workload:
    """The cost model's view of an analysed config."""
    spec = report.spec
    if spec.dialect == "megatron":
        return _megatron_workload(report, profile)
    if spec.dialect == "accelerate":
        sized = _accelerate_workload(report, spec)
        if sized is not None:
            return sized
    v = spec.values
    fw = (getattr(spec, "framework", None) or {}).get("version")
    framework = "kempnerforge" if spec.dialect == "kempnerforge" else (
        "native" if spec.dialect == "native" else f"accelerate@{fw}" if spec.dialect == "accelerate"
        else f"torchtitan@{fw or '0.2.x'}")
    notes = []
    params = _int(v.get("model.params"))
    n_layers, dim = _int(v.get("model.n_layers")), _int(v.get("model.dim"))
    heads, kv = _int(v.get("model.n_heads")), _int(v.get("model.n_kv_heads"))
    head_dim = _int(v.get("model.head_dim")) or (dim // heads if dim and heads else None)
    num_experts = _int(v.get("model.num_experts")) or 0
    top_k, moe_layers, expert_params = 0, 0, 0
    if num_experts:
        if spec.dialect == "kempnerforge":
            hidden = _int(v.get("model.ffn_hidden_dim")) or 0
            every = _int(v.get("model.moe_frequency")) or 1
            moe_layers = (n_layers or 0) // every
            top_k = _int(v.get("model.moe_top_k")) or 2
            per_expert = 3 * (dim or 0) * hidden
        else:
            entry = _model_entry(report, options) or {}
            hidden = entry.get("moe_hidden_dim") or _int(v.get("model.moe_hidden_dim")) or 0
            moe_layers = entry.get("moe_layers") or (n_layers or 0)
            top_k = entry.get("top_k") or 1
            per_expert = 3 * (dim or 0) * hidden
        expert_params = moe_layers * num_experts * per_expert
        active = (params - expert_params + moe_layers * top_k * per_expert) if params else None
    else:
        active = params
    if not params:
        notes.append("the model's size is unknown: layouts are ranked by fewest changes, not by time")
    seq, batch, schedule = _batch(spec)
    if seq is None or batch[1][0] is None:
        notes.append("no sequence length or microbatch size: activations and per-token times are not estimated")
    precision = v.get("train.mixed_precision") if spec.dialect == "kempnerforge" else v.get(
        "training.mixed_precision_param")
    param_bytes = 4 if precision in ("fp32", "float32") else 2
    ac, ac_from = _ac_mode(report, profile)
    from meshlint.mesh.memory_shape import shape

    mem = shape(report, None if spec.dialect == "kempnerforge" else _model_entry(report, options), ac, batch[1][1])
    return Workload(framework, params, expert_params, active, n_layers, moe_layers, dim,
                    heads * head_dim if heads and head_dim else None, kv * head_dim if kv and head_dim else None,
                    top_k, _int(v.get("model.vocab_size")), seq, batch, schedule, _bytes_per_param(spec), param_bytes, ac, ac_from,
                    tuple(notes), mem)


class AccelerateShape(Record):
    """What Model.memory_peak prices an Accelerate run with: the model as Accelerate trains it and the settings
    that decide which ranks each state is sharded over (meshlint.estimate.memory_accelerate.layout)."""

    shape: object                 # meshlint.mesh.memory.Shape
    settings: dict

    @property
    def num_experts(self) -> int:
        return self.shape.num_experts


def _accelerate_workload(report, spec) -> Workload | None:
    """An Accelerate run whose model config.json meshlint reads (memory_accelerate.sized): its sizes, and the batch
    from the training script's arguments (per-device batch × sequence, gradient accumulation steps); None where
    the model is not sized (the generic path then says what is unknown)."""
    from meshlint.estimate import memory_accelerate

    shape, st, found = memory_accelerate.sized(report)
    if shape is None:
        return None
    notes = [n for n in found if n]
    tokens = memory_accelerate.tokens(st)
    if tokens is None:
        notes.append("no --per_device_train_batch_size and --max_seq_length on the launch line (the training "
                     "script's): activations, per-token times and the memory of each layout are not estimated")
    accum = st["accumulation"]
    active = shape.params - shape.expert_params + (shape.expert_params * shape.top_k // shape.num_experts
                                                   if shape.num_experts else 0)
    fw = (getattr(spec, "framework", None) or {}).get("version")
    return Workload(f"accelerate@{fw}", shape.params, shape.expert_params, active, shape.n_layers, shape.moe_layers,
                    shape.dim, shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim, shape.top_k,
                    shape.vocab, st["seq"], ((tokens, accum), (tokens, accum)), None, None, shape.compute_bytes,
                    shape.ac, "fsdp_activation_checkpointing / --gradient_checkpointing", tuple(notes),
                    AccelerateShape(shape, st))


class MegatronShape(Record):
    """What Model.memory_peak hands meshlint.mesh.memory_megatron for a Megatron-LM launch: its options."""

    args: dict
    num_experts: int


def _megatron_workload(report, profile: Cluster) -> Workload:
    """A Megatron-LM launch: the model's sizes from its flags (meshlint.mesh.memory_megatron), the batch as
    Megatron cuts it (microbatches of --micro-batch-size sequences, global ÷ (micro · dp) of them per step, dp
    as the launch resolves on its world)."""
    from meshlint.mesh import memory_megatron as mm

    spec = report.spec
    a = spec.extra.get("args") or {}
    sizes = mm.sizes(a, 1)
    notes = []
    params = mm.parameter_count(a)
    if params is None:
        notes.append("the model's size is unknown: layouts are ranked by fewest changes, not by time")
    expert_params = moe_layers = top_k = 0
    active = params
    if sizes is not None and sizes.experts:
        _dense, _rest, experts = mm.layer_params(sizes)
        moe_layers, top_k = sum(sizes.moe_layers), sizes.topk
        expert_params = int(experts * moe_layers)
        active = int(params - expert_params + expert_params * top_k / sizes.experts) if params else None
    seq, mbs, gbs = _int(a.get("seq_length")), _int(a.get("micro_batch_size")), _int(a.get("global_batch_size"))
    dp = (report.resolution.degrees or {}).get("dp_shard") if report.resolution is not None else None
    m = max(1, gbs // (mbs * dp)) if gbs and mbs and isinstance(dp, int) and dp > 0 else 1
    unit = seq * mbs if seq and mbs else None
    if unit is None:
        notes.append("no sequence length or microbatch size: activations and per-token times are not estimated")
    vp = a.get("num_virtual_stages_per_pipeline_rank") or a.get("num_layers_per_virtual_pipeline_stage")
    ac = profile.activation_checkpointing or a.get("recompute_granularity") or "none"
    h = sizes.hidden if sizes else None
    return Workload("megatron@0.16.1", params, expert_params, active, sizes.layers if sizes else None, moe_layers,
                    h, sizes.heads * sizes.kv_channels if sizes else None,
                    sizes.groups * sizes.kv_channels if sizes else None, top_k, sizes.vocab if sizes else None, seq,
                    ((unit, m), (unit, m)), "Interleaved1F1B" if vp else "1F1B", None,
                    2 if a.get("bf16") or a.get("fp16") else 4, ac, "--recompute-granularity", tuple(notes),
                    MegatronShape(a, sizes.experts if sizes else 0))


def _batch(spec) -> tuple:
    """(sequence length, ((microbatch tokens, microbatches) with pp > 1, (the same) with pp = 1), schedule),
    per data-parallel rank and iteration, as each framework cuts its batch."""
    v = spec.values
    if spec.dialect == "kempnerforge":
        # train.py: grad_accum_steps microbatches of batch_size sequences (the pipeline's microbatches with pp)
        seq, size, accum = _int(v.get("train.seq_len")), _int(v.get("train.batch_size")), _int(
            v.get("train.grad_accum_steps")) or 1
        from meshlint.mesh.pipeline import KF_SCHEDULES

        unit = seq * size if seq and size else None
        return seq, ((unit, accum), (unit, accum)), KF_SCHEDULES.get(v.get("pp_schedule") or "")
    if spec.dialect != "torchtitan":
        return None, ((None, 1), (None, 1)), None
    version = (getattr(spec, "framework", None) or {}).get("version") or "0.2.x"
    from meshlint.mesh.pipeline import SCHEDULES

    if version.startswith("main"):
        # num_tokens_per_microbatch_per_dp_rank tokens per microbatch; num_pp_microbatches of them with pp
        tokens = _int(v.get("training.num_tokens_per_microbatch_per_dp_rank"))
        name = v.get("parallelism.pipeline_parallel_schedule")
        known = SCHEDULES.get((name or "").lower())
        count = _int(v.get("parallelism.num_pp_microbatches")) or 1
        return (_int(v.get("training.max_context_length")), ((tokens, count), (tokens, 1)),
                known[0] if known else name)
    # 0.2.x and 0.3.0: local_batch_size sequences; with pp, cut into microbatches of the microbatch size
    seq, local = _int(v.get("training.seq_len")), _int(v.get("training.local_batch_size"))
    if version == "0.2.x":
        micro, name = _int(v.get("pp_microbatch_size")), v.get("pp_schedule")
    else:
        micro = _int(v.get("parallelism.pipeline_parallel_microbatch_size"))
        name = v.get("parallelism.pipeline_parallel_schedule")
    known = SCHEDULES.get((name or "").lower())
    piped = (seq * micro, local // micro) if seq and local and micro and local % micro == 0 else (None, 1)
    flat = (seq * local if seq and local else None, 1)
    return seq, (piped, flat), known[0] if known else name


def _ac_mode(report, profile: Cluster) -> tuple:
    if profile.activation_checkpointing:
        return profile.activation_checkpointing, "[tool.meshlint.cluster] activation_checkpointing"
    spec, source = report.spec, report.source
    data = getattr(source, "data", None) or {}
    if spec.dialect == "kempnerforge":
        mode = (data.get("train") or {}).get("activation_checkpointing", "none") if isinstance(
            data.get("train"), dict) else "none"
        return (mode if mode in AC_MODES else "none"), "train.activation_checkpointing (KempnerForge default none)"
    if spec.dialect == "torchtitan":
        types = getattr(source, "types", None)
        if types is not None:  # a registry: the config class set for activation_checkpoint
            cls = types.get("activation_checkpoint") or ""
            for word, mode in (("Full", "full"), ("Selective", "selective"), ("No", "none")):
                if word in cls:
                    return mode, f"activation_checkpoint={cls}"
            return "selective", "assumed (the registry sets no activation_checkpoint meshlint recognises)"
        table = data.get("activation_checkpoint")
        mode = table.get("mode", "selective") if isinstance(table, dict) else "selective"
        return (mode if mode in AC_MODES else "selective"), "[activation_checkpoint] mode (torchtitan default selective)"
    return "selective", "assumed"


def _bytes_per_param(spec) -> int | None:
    from meshlint.frameworks.dialects import module_of

    module = module_of(spec)
    return module.bytes_per_param(spec) if hasattr(module, "bytes_per_param") else None


def _model_entry(report, options) -> dict | None:
    from meshlint.frameworks import models

    v = report.spec.values
    name, flavor = v.get("model.name"), v.get("model.flavor")
    if not isinstance(name, str) or not isinstance(flavor, str):
        return None
    version = (getattr(report.spec, "framework", None) or {}).get("version")
    try:
        table = options.models if options.models is not None else (
            models.builtin_for(version) if version else models.builtin())
    except Exception:  # noqa: BLE001 - a model table that cannot be read: the estimate goes without it
        return None
    entry = models.lookup(table, name, flavor)
    if entry is None:
        from meshlint.frameworks.torchtitan.registry import MODEL_ALIASES

        entry = models.lookup(table, MODEL_ALIASES.get(name), flavor)
    return entry


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# ----------------------------------------------------------------------------- the estimate

class Estimate(Record):
    """One layout's estimate; times in seconds per iteration, memory in GiB per GPU."""

    time: float | None            # iteration time (None: no batch known)
    per_token: float | None       # time / tokens of the whole world per iteration
    compute: float
    comm: dict                    # kind -> exposed seconds (tp, cp, ep, pp, dp)
    raw: dict                     # kind -> seconds before overlap
    links: dict                   # kind -> "intra" | "inter"
    bubble: float                 # seconds
    bubble_fraction: float
    state_gib: float | None
    activation_gib: float | None
    memory_gib: float | None
    fits: bool | None
    mfu: float | None
    tokens: int | None            # tokens per iteration, whole world
    peak: object = None           # meshlint.mesh.memory.Peak: the whole per-GPU peak, per stage
    capacity_gib: float | None = None
    global_batch: dict | None = None  # {"sequences", "tokens"} per optimizer step

    def to_json(self) -> dict:
        r = lambda x: None if x is None else round(x, 6)  # noqa: E731
        return {"time_s": r(self.time), "time_per_million_tokens_s": r(self.per_token * 1e6) if self.per_token
                else None, "compute_s": r(self.compute),
                "communication_s": {k: r(v) for k, v in self.comm.items()},
                "communication_before_overlap_s": {k: r(v) for k, v in self.raw.items()},
                "links": dict(self.links), "bubble_s": r(self.bubble), "bubble_fraction": r(self.bubble_fraction),
                "memory": {"model_states_gib": r(self.state_gib), "activations_gib": r(self.activation_gib),
                           "total_gib": r(self.memory_gib), "fits": self.fits,
                           **(self.peak.to_json(self.capacity_gib) if self.peak is not None else
                              {"peak_gib": None, "capacity_gib": self.capacity_gib})},
                "global_batch": self.global_batch,
                "mfu": r(self.mfu), "tokens_per_iteration": self.tokens}


class Model:
    """Prices layouts of one workload on one cluster and target."""

    def __init__(self, work: Workload, profile: Cluster, world: int, gpus_per_node: int | None, placement: str,
                 gpu_memory_gib: float):
        self.w = work
        self.c = profile
        self.world = world
        self.gpn = gpus_per_node or profile.gpus_per_node
        self.placement = placement
        self.memory = gpu_memory_gib
        self._place: dict = {}
        self._crit: dict = {}
        self._peaks: dict = {}

    # -- links
    def link(self, size: int, stride: int, span: int) -> tuple:
        """(Link, "intra" | "inter") for a group of ``size`` ranks ``stride`` apart in a mesh of ``span``."""
        if size <= 1:
            return self.c.intra, "intra"
        key = (size, stride, span)
        hit = self._place.get(key)
        if hit is None:
            p = place(Axis("g", size, stride, "m", span), self.gpn, max(self.world, span), self.placement)
            hit = self._place[key] = (self.c.intra, "intra") if p.intra_node else (self.c.inter, "inter")
        return hit

    def axes(self, d: dict) -> dict:
        """(size, stride, span) of each parallelism's group in the framework's mesh, in closed form
        (checked against the dialects' resolutions in tests/test_solve.py)."""
        world, fw = self.world, self.w.framework
        pp, dr, ds, cp, tp, ep = (d.get(n, 1) or 1 for n in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"))
        if fw == "kempnerforge":  # mesh (pp, dp_replicate, dp_shard, ep, tp); cp is not a mesh dim
            span = world // cp
            return {"tp": (tp, 1, span), "ep": (ep, tp, span), "fsdp": (ds, tp * ep, span),
                    "efsdp": (ds, tp * ep, span), "dp_replicate": (dr, tp * ep * ds, span),
                    "pp": (pp, span // pp, span), "cp": (1, 1, span)}
        etp = d.get("etp", 1) or 1
        out = {"tp": (tp, 1, world), "cp": (cp, tp, world), "fsdp": (ds * cp, tp, world),
               "dp_replicate": (dr, ds * cp * tp, world), "pp": (pp, world // pp, world)}
        efsdp = ds * cp * tp // (ep * etp) if ep * etp else 1
        out["ep"] = (ep, etp, world)
        # without ep the experts are sharded like dense weights: tp, then FSDP over dp_shard·cp (no efsdp mesh:
        # parallel_dims._mesh_exist; 0.3.0's expert_param_placement_dense, models/common/moe_sharding.py)
        out["efsdp"] = (efsdp, ep * etp, world) if ep > 1 else out["fsdp"]
        return out

    # -- collectives (ring): seconds for a message of ``size`` bytes over ``n`` ranks
    @staticmethod
    def _gather(n: int, size: float, link: Link) -> float:       # all-gather or reduce-scatter
        return (n - 1) * link.latency_us * 1e-6 + (n - 1) / n * size / (link.bandwidth * 1e9) if n > 1 else 0.0

    @staticmethod
    def _reduce(n: int, size: float, link: Link) -> float:       # all-reduce = reduce-scatter + all-gather
        return 2 * Model._gather(n, size, link)

    def estimate(self, d: dict, batch: tuple | None = None, global_batch: dict | None = None) -> Estimate:
        """The full estimate of one layout (``score`` is the ranking's cheap form of it); ``batch`` replaces the
        workload's ((microbatch tokens, microbatches) with pp, (the same) without) when the layout changes it."""
        r = self._ranks_of(d)
        pp, dr, ds, cp, tp, ep = (r.get(n, 1) or 1 for n in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"))
        etp = r.get("etp", 1) or 1
        crit = self._critical(pp, tp, cp, ep, etp, batch)
        compute, raw_crit, links_crit, tokens_dp, m, mb_tokens, flops_token = crit
        raw = dict(raw_crit)
        links = dict(links_crit)
        dp_raw = self._data_parallel(pp, dr, ds, cp, tp, ep, etp, m, raw, links)
        comm = {k: raw[k] for k in ("tp", "cp", "ep", "pp") if k in raw}
        if dp_raw:
            comm["dp"] = max(0.0, dp_raw - self.c.overlap * compute)  # prefetched, hidden behind compute
        busy = compute + sum(comm.get(k, 0.0) for k in ("tp", "cp", "ep", "pp"))
        fraction = self.bubble_fraction(pp, m)
        bubble = busy * fraction / (1 - fraction) if fraction < 1 else 0.0
        time = busy + comm.get("dp", 0.0) + bubble if tokens_dp else None
        tokens = tokens_dp * dr * ds if tokens_dp else None  # each data-parallel rank reads its own batch
        state = self._state(pp, tp, ds, cp)
        peak = self.memory_peak(d, batch)
        activations = peak.peak.terms["activations"] / GIB if peak is not None and peak.peak.terms[
            "activations"] else None
        total = peak.peak_gib if peak is not None else None
        fits = None if total is None else total <= self.memory
        per_token = time / tokens if time and tokens else None
        mfu = (flops_token * tokens / time / (self.world * self.c.gpu_tflops * 1e12)) if time and tokens and \
            flops_token else None
        return Estimate(time, per_token, compute, comm, raw, links, bubble, fraction, state, activations, total,
                        fits, mfu, tokens, peak, self.memory, global_batch)

    def score(self, d: dict, batch: tuple | None = None, memory: bool = True) -> tuple:
        """(does not fit, time per token): what the ranking sorts by, without building an Estimate (``memory``
        False: the fit is not estimated and reads as None)."""
        r = self._ranks_of(d)
        pp, dr, ds, cp, tp, ep = (r.get(n, 1) or 1 for n in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"))
        etp = r.get("etp", 1) or 1
        compute, raw_crit, _links, tokens_dp, m, mb_tokens, _f = self._critical(pp, tp, cp, ep, etp, batch)
        raw: dict = {}
        dp_raw = self._data_parallel(pp, dr, ds, cp, tp, ep, etp, m, raw, {})
        busy = compute + sum(raw_crit.values())
        fraction = self.bubble_fraction(pp, m)
        bubble = busy * fraction / (1 - fraction) if fraction < 1 else 0.0
        peak = self.memory_peak(d, batch, ends_only=True) if memory else None
        fits = None if peak is None else peak.peak_gib <= self.memory
        if not tokens_dp:
            return fits is False, sum(raw_crit.values()) + dp_raw + fraction
        time = busy + max(0.0, dp_raw - self.c.overlap * compute) + bubble
        return fits is False, time / (tokens_dp * dr * ds)

    def _ranks_of(self, d: dict) -> dict:
        """The layout as the ranks each state is sharded over and each batch is read by: an Accelerate run's
        ParallelismConfig sizes mapped as Accelerate applies them (none: FSDP over the whole world, or DDP over
        it; memory_accelerate.layout); any other framework's layout as it is."""
        if not isinstance(self.w.shape, AccelerateShape):
            return d
        from meshlint.estimate.memory_accelerate import layout

        ranks, _why = layout(self.w.shape.settings, d, self.world, self.gpn)
        return d if ranks is None else {**d, **ranks}

    def memory_peak(self, d: dict, batch: tuple | None = None, ends_only: bool = False):
        """The whole per-GPU peak of every pipeline stage (meshlint.mesh.memory.Peak), or None (model size unknown)."""
        from meshlint.mesh import memory

        if self.w.shape is None:
            return None
        pp = d.get("pp", 1) or 1
        both = batch or self.w.batch
        mb_tokens, m = both[0] if pp > 1 else both[1]
        if isinstance(self.w.shape, MegatronShape):
            return self._megatron_peak(d, mb_tokens, m)
        if isinstance(self.w.shape, AccelerateShape):
            return self._accelerate_peak(d, mb_tokens, m, ends_only)
        # dp_replicate changes the peak only by turning FSDP2 on (memory.estimate's `sharded`): one entry for all > 1
        key = (pp, (d.get("dp_replicate") or 1) > 1, d.get("dp_shard") or 1, d.get("cp") or 1, d.get("tp") or 1,
               d.get("ep") or 1, d.get("etp") or 1, mb_tokens, m, ends_only)
        hit = self._peaks.get(key)
        if hit is None:
            if len(self._peaks) > 100_000:  # a search over many layouts: stay bounded
                self._peaks.clear()
            hit = self._peaks[key] = memory.estimate(self.w.shape, d, mb_tokens, m or 1, self.w.schedule, ends_only)
        return hit

    def _accelerate_peak(self, d: dict, mb_tokens: int | None, m: int | None, ends_only: bool):
        """An Accelerate layout's peak: its ParallelismConfig sizes mapped to the ranks each state is sharded over as
        Accelerate would (FSDP2 over the mesh or the whole world, FSDP1's strategy, DDP), then meshlint.mesh.memory."""
        from meshlint.estimate.memory_accelerate import layout
        from meshlint.mesh import memory

        key = ("accelerate",) + tuple(d.get(n) or 1 for n in ("dp_replicate", "dp_shard", "cp", "tp")) + (
            mb_tokens, m, ends_only)
        if not mb_tokens:  # the script's batch: a states-only bound would read as "fits"; say unknown instead
            return None
        hit = self._peaks.get(key, False)
        if hit is False:
            if len(self._peaks) > 100_000:
                self._peaks.clear()
            degrees, _why = layout(self.w.shape.settings, d, self.world, self.gpn)
            hit = None if degrees is None else memory.estimate(self.w.shape.shape, degrees, mb_tokens, m or 1, None,
                                                               ends_only)
            self._peaks[key] = hit
        return hit

    def _megatron_peak(self, d: dict, mb_tokens: int | None, m: int | None):
        """A Megatron-LM layout's peak (meshlint.mesh.memory_megatron), with the microbatch the plan chose."""
        from meshlint.frameworks.megatron.core_0_16 import layer_split
        from meshlint.mesh import memory_megatron

        a = self.w.shape.args
        seq = self.w.seq_len
        key = ("megatron",) + tuple(d.get(n) or 1 for n in ("pp", "dp_shard", "cp", "tp", "ep", "etp")) + (
            mb_tokens, m)
        hit = self._peaks.get(key)
        if hit is None:
            if len(self._peaks) > 100_000:
                self._peaks.clear()
            if mb_tokens and seq:
                a = dict(a, micro_batch_size=max(1, mb_tokens // seq))
            split = layer_split(a, d.get("pp") or 1)
            if split.get("error") or not split.get("counts"):
                hit = None
            else:
                degrees = dict(d, etp=d.get("etp") or d.get("tp") or 1)
                hit, _notes = memory_megatron.estimate(a, degrees, split, m or 1)
            self._peaks[key] = hit
        return hit

    @property
    def kf(self) -> bool:
        return self.w.framework == "kempnerforge"

    def _state(self, pp: int, tp: int, ds: int, cp: int):
        w = self.w
        if not w.params or not w.bytes_per_param:
            return None
        return w.params * w.bytes_per_param / (pp * tp * (ds if self.kf else ds * cp)) / GIB

    def _critical(self, pp: int, tp: int, cp: int, ep: int, etp: int, batch: tuple | None = None) -> tuple:
        """Compute and the on-the-critical-path communication (TP, CP, EP, PP): they depend on pp, tp, cp, ep
        (and the batch) only, so thousands of layouts share a few dozen of these (memoised)."""
        key = (pp, tp, cp, ep, etp, batch)
        hit = self._crit.get(key)
        if hit is not None:
            return hit
        w, c = self.w, self.c
        kf = self.kf
        cp_split = 1 if kf else cp            # KempnerForge does not wire cp: its ranks do not split sequences
        axes = self.axes({"pp": pp, "tp": tp, "cp": cp, "ep": ep, "etp": etp, "dp_shard": self.world // (
            pp * tp * cp * (ep if kf else 1)) or 1})
        links, raw = {}, {}
        L = w.n_layers or 0
        layers = L / pp
        moe_layers = w.moe_layers / pp
        both = batch or w.batch
        mb_tokens, m = both[0] if pp > 1 else both[1]
        m = m or 1
        tokens_dp = mb_tokens * m if mb_tokens else None
        passes = 3 if w.ac == "full" else 2   # forward, (recomputed forward,) backward
        # bytes of an activation: the compute dtype, which is the parameters' (FSDP2's MixedPrecisionPolicy
        # param_dtype, KempnerForge's mixed_precision): bf16, or fp32 when the config trains in fp32
        act = w.param_bytes
        # compute per GPU per iteration: the dp rank's tokens split over tp·cp·pp (not ep: EP splits experts)
        flops_token = (6 * w.active_params + (12 * L * w.seq_len * (w.attn_dim or 0) if w.seq_len else 0)) \
            if w.active_params else 0
        compute = (flops_token * tokens_dp / (tp * cp_split * pp) * (passes + 1) / 3
                   / (c.gpu_tflops * 1e12 * c.compute_efficiency)) if tokens_dp and flops_token else 0.0
        # TP (sequence parallel): 2 all-gathers + 2 reduce-scatters of the activations per layer and pass
        if tp > 1 and mb_tokens and w.dim:
            link, links["tp"] = self.link(*axes["tp"])
            msg = mb_tokens / cp_split * w.dim * act
            raw["tp"] = layers * m * 4 * passes * self._gather(tp, msg, link)
        # CP: the ring passes each rank's K/V chunk cp-1 times per forward; K/V and their gradients backward
        if cp_split > 1 and mb_tokens and w.kv_dim:
            link, links["cp"] = self.link(*axes["cp"])
            chunk = 2 * mb_tokens / cp * w.kv_dim / tp * act
            steps = (cp - 1) * (passes + 1)
            raw["cp"] = layers * m * steps * (link.latency_us * 1e-6 + chunk / (link.bandwidth * 1e9))
        # EP: all-to-all dispatch + combine per MoE layer and pass; each token goes to top_k experts
        if ep > 1 and mb_tokens and w.dim and w.moe_layers:
            link, links["ep"] = self.link(*axes["ep"])
            local = mb_tokens / (cp_split * tp)
            msg = local * w.top_k * w.dim * act
            raw["ep"] = moe_layers * m * 2 * passes * self._gather(ep, msg, link)
        # PP: activations forward and gradients backward at each stage boundary, per microbatch: what the busiest
        # rank sends (a first or last stage sends one way only; measured: bench/bench_cost_vs_smoke.py)
        if pp > 1 and mb_tokens and w.dim:
            link, links["pp"] = self.link(*axes["pp"])
            msg = mb_tokens / (cp_split * tp) * w.dim * act
            raw["pp"] = m * pp_sends(pp, w.schedule) * (link.latency_us * 1e-6 + msg / (link.bandwidth * 1e9))
        hit = self._crit[key] = (compute, raw, links, tokens_dp, m, mb_tokens, flops_token)
        return hit

    def _data_parallel(self, pp, dr, ds, cp, tp, ep, etp, m, raw: dict, links: dict) -> float:
        """FSDP all-gathers of the parameters (forward and backward of each microbatch; once per iteration with
        torchtitan's pp, which keeps them) and reduce-scatters of the fp32 gradients over the FSDP group, the
        experts' over the efsdp group, and HSDP's all-reduce of the shards over dp_replicate. Fills ``raw`` and
        ``links``; returns their sum."""
        w = self.w
        if not w.params:
            return 0.0
        kf = self.kf
        axes = self.axes({"pp": pp, "dp_replicate": dr, "dp_shard": ds, "cp": cp, "tp": tp, "ep": ep, "etp": etp})
        layers = (w.n_layers or 0) / pp
        dense = (w.params - w.expert_params) / (pp * tp)
        experts = w.expert_params / (pp * _expert_split(kf, tp, ep, etp)) if w.expert_params else 0.0
        # torchtitan keeps the parameters gathered across microbatches with pp (fsdp.py:112-135) and reduces after
        # every microbatch; KempnerForge always reshards after forward (apply_fsdp2's default, parallel.py:250-254,
        # never overridden by train.py) and reduces once per step (maybe_no_sync)
        if kf:
            gathers, scatters = 2 * m, 1
        elif pp > 1:
            gathers, scatters = 1, 1
        else:
            gathers, scatters = 2 * m, m
        n_f, n_e = axes["fsdp"][0], axes["efsdp"][0]
        total = 0.0
        if n_f > 1:
            link, links["fsdp"] = self.link(*axes["fsdp"])
            raw["fsdp"] = t = (gathers * self._gather(n_f, dense * w.param_bytes, link)
                               + scatters * self._gather(n_f, dense * 4, link)
                               + layers * (gathers + scatters) * (n_f - 1) * link.latency_us * 1e-6)
            total += t
        if experts and n_e > 1:
            link, links["efsdp"] = self.link(*axes["efsdp"])
            raw["efsdp"] = t = (gathers * self._gather(n_e, experts * w.param_bytes, link)
                                + scatters * self._gather(n_e, experts * 4, link))
            total += t
        if dr > 1:
            link, links["dp_replicate"] = self.link(*axes["dp_replicate"])
            shard = (dense / max(n_f, 1) + (experts / max(n_e, 1) if experts else 0.0)) * 4
            raw["dp_replicate"] = t = self._reduce(dr, shard, link)
            total += t
        return total

    def bubble_fraction(self, pp: int, m: int) -> float:
        """Idle fraction of the schedule: (p-1)/(m+p-1) for single-stage schedules, (p-1)/(v·m+p-1) for
        v stages per rank, a third of that for the zero-bubble ones (an approximation: docs)."""
        if pp <= 1:
            return 0.0
        name = self.w.schedule or "1F1B"
        v = 2 if name in LOOPED else 1
        frac = (pp - 1) / (v * m + pp - 1)
        if name in ("InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"):
            frac /= 3
        return frac

    def activations(self, pp: int, m: int, tp: int, cp: int, mb_tokens) -> float | None:
        """GiB of activations a GPU holds at the peak: per layer 34·s·b·h bytes / tp (Korthikanti et al.,
        sequence parallel, flash attention), 2·s·b·h with full recomputation (the layer input) plus one
        layer's full set; layers of its stage times the microbatches in flight (1F1B: pp)."""
        w = self.w
        if not mb_tokens or not w.dim or not w.n_layers:
            return None
        tokens = mb_tokens / cp
        full_layer = 34 * tokens * w.dim / tp
        layers = w.n_layers / pp
        inflight = min(m, pp) if pp > 1 and (w.schedule or "1F1B") != "GPipe" else (m if pp > 1 else 1)
        if w.ac == "full":
            total = 2 * tokens * w.dim / tp * layers * inflight + full_layer
        else:
            total = full_layer * layers * inflight
        # the output layer's logits: bf16, their fp32 copy for the loss and its gradient (10 bytes per
        # element), sharded over tp (loss parallel), on the last stage
        total += 10 * tokens * (w.vocab or 0) / tp
        return total / GIB


def _expert_split(kf: bool, tp: int, ep: int, etp: int) -> int:
    """Over how many ranks one expert weight is split before FSDP: ep·etp; torchtitan without ep shards the
    experts over tp like dense weights (KempnerForge keeps them whole under TP: tensor_parallel.py:74-77)."""
    return tp if not kf and ep == 1 else ep * etp
