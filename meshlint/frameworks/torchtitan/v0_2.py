"""torchtitan: ``[parallelism]`` configs, resolved like ``ParallelDims`` does.

Facts mirrored from torchtitan's ``ParallelDims`` (the unflatten rewrite with
expert tensor parallelism, shared/DIALECTS.md and seed 003):
* ``_validate``: every degree but dp_shard >= 1; dp_shard -1 or >= 1;
  dp_shard = -1 -> ``world // (dp_replicate*cp*tp*pp)`` (floor, no divisibility
  check), then ``assert dp_shard >= 1`` and the product assert, which EP is
  not part of; with ep > 1, etp must equal tp or 1;
* ``build_mesh``: one world mesh unflattened into dataloading
  ``(pp, batch, cp, tp)``, dense ``(pp, dp_replicate, fsdp, tp)`` and sparse
  ``(pp, dp_replicate, efsdp, ep, etp)`` with every dim kept at size 1, plus
  ``loss`` flattened from ``(batch, cp)``. ``efsdp = fsdp*tp // (etp*ep)`` is
  never checked: when it is not whole the sparse unflatten fails late.
"""

from __future__ import annotations

from math import gcd, prod

from meshlint.frameworks.base import (
    Key,
    Resolution,
    Spec,
    flattened,
    no_coercion,
    read_keys,
    settle_dp_shard,
    unknown_keys,
    usable,
)
from meshlint.mesh.devmesh import Mesh

NAME = "torchtitan"
VERSION = "0.2.x"  # the TOML era; later versions: torchtitan_v030, torchtitan_main (see versions.py)
SECTION = "parallelism"
STRICT_SECTIONS = ("parallelism",)
FACTORS = ("dp_replicate", "dp_shard", "cp", "tp", "pp")  # the order of its assert message
ONE_D = ("pp", "batch", "loss", "dp_replicate", "fsdp", "cp", "tp", "ep", "efsdp", "etp")

P = "parallelism."
# what people type for torchtitan's long degree names (a did-you-mean difflib cannot find)
SHORT_NAMES = {"dp_replicate": "data_parallel_replicate_degree", "dp_shard": "data_parallel_shard_degree",
               "fsdp": "data_parallel_shard_degree", "tp": "tensor_parallel_degree", "pp": "pipeline_parallel_degree",
               "cp": "context_parallel_degree", "ep": "expert_parallel_degree", "etp": "expert_tensor_parallel_degree"}
KEYS = [
    Key(P + "data_parallel_replicate_degree", "int", 1, "dp_replicate"),
    Key(P + "data_parallel_shard_degree", "int", -1, "dp_shard"),
    Key(P + "tensor_parallel_degree", "int", 1, "tp"),
    Key(P + "pipeline_parallel_degree", "int", 1, "pp"),
    Key(P + "context_parallel_degree", "int", 1, "cp"),
    Key(P + "expert_parallel_degree", "int", 1, "ep"),
    Key(P + "expert_tensor_parallel_degree", "int", 1, "etp"),
    Key(P + "pipeline_parallel_schedule", "str", "1F1B", "pp_schedule"),
    Key(P + "pipeline_parallel_microbatch_size", "int", 1, "pp_microbatch_size"),
    Key(P + "pipeline_parallel_layers_per_stage", "int", None, "pp_layers_per_stage"),
    Key(P + "pipeline_parallel_first_stage_less_layers", "int", 1, "pp_first_stage_less_layers"),
    Key(P + "pipeline_parallel_last_stage_less_layers", "int", 1, "pp_last_stage_less_layers"),
    Key(P + "enable_async_tensor_parallel", "bool", False, "async_tp"),
    Key(P + "fsdp_reshard_after_forward", "str", "default", None, ("default", "always", "never")),
    Key(P + "disable_loss_parallel", "bool", False, None),
    Key(P + "module_fqns_per_model_part", "array", None, None),
    Key(P + "pipeline_parallel_schedule_csv", "str", "", None),
    Key(P + "pipeline_parallel_expert_parallel_overlap", "bool", True, None),
    Key(P + "context_parallel_load_balancer", "str", "headtail", None),
    Key(P + "context_parallel_rotate_method", "str", "allgather", None, ("allgather", "alltoall")),
    Key(P + "expert_parallel_comm_backend", "str", "standard", None, ("standard", "deepep")),
    Key("model.name", "str", None, "model.name"),
    Key("model.flavor", "str", None, "model.flavor"),
    Key("training.local_batch_size", "int", 8, "training.local_batch_size"),
    Key("training.global_batch_size", "int", -1, "training.global_batch_size"),
    Key("training.seq_len", "int", 2048, "training.seq_len"),
    Key("training.dtype", "str", "float32", "training.dtype", ("bfloat16", "float32")),
    Key("compile.enable", "bool", False, "compile.enable"),
]
DEGREE_KEYS = {k.fact: k.path for k in KEYS if k.fact in ("dp_replicate", "dp_shard", "tp", "pp", "cp", "ep", "etp")}
_VALIDATED = ("dp_replicate", "cp", "tp", "pp", "ep", "etp")  # _validate's loop, in order


def read(source) -> Spec:
    return read_toml(source, KEYS, DEGREE_KEYS, SHORT_NAMES, _VALIDATED)


def read_toml(source, keys: list, degree_keys: dict, short_names: dict, validated: tuple) -> Spec:
    """A TOML-era config (this version's or v0.1.0's key list): values, degrees, their load-time checks."""
    spec = Spec(dialect=NAME)
    read_keys(source.data, keys, no_coercion("torchtitan"), spec)
    unknown_keys(source.data, STRICT_SECTIONS, keys, spec, short_names)
    table = source.data.get("parallelism")
    for name, path in degree_keys.items():
        spec.degrees[name] = spec.values.pop(name)
        spec.degree_keys[name] = path
        spec.degree_present[name] = isinstance(table, dict) and path.split(".", 1)[1] in table
    # Model sizes come from torchtitan's registry (name + flavor), not from the file:
    # attach_model() fills them from meshlint's model table.
    spec.values["model.known"] = False
    spec.load_error = _validate_degrees(spec.degrees, validated)
    return spec


MODEL_FACTS = ("n_layers", "n_heads", "n_kv_heads", "dim", "head_dim", "vocab_size", "ffn_hidden_dim",
               "num_experts", "moe_hidden_dim", "attention", "source",
               "pipelining",  # the TrainSpec has a pipelining_fn (null for a user entry that does not say)
               "validator",   # ... and a build_validator_fn
               "attn_type")   # the flavor's attention (sdpa, flex, varlen)


_TABLE_NAMES: dict = {}


def _in_table(table: dict | None, name: str) -> bool:
    """Whether ``table`` (built-in entries, rule packs', the project's) has any flavor of model ``name``."""
    if not table:
        return False
    hit = _TABLE_NAMES.get(id(table))
    if hit is None or hit[0] is not table:
        if len(_TABLE_NAMES) > 8:
            _TABLE_NAMES.clear()
        hit = _TABLE_NAMES[id(table)] = (table, frozenset(k[0] for k in table if isinstance(k, tuple) and k))
    return name in hit[1]


def attach_model(spec: Spec, table: dict) -> None:
    """Fill the model facts from the table entry of ``[model] name`` / ``flavor`` (if there is one)."""
    from meshlint.frameworks.models import lookup, param_count, registered

    name = spec.values.get("model.name")
    names = registered()  # get_train_spec's own names; a table entry (the user's own model) counts too
    if names is not None and isinstance(name, str):
        spec.values["model.registered"] = name in names or _in_table(table, name)
    entry = lookup(table, name, spec.values.get("model.flavor"))
    if entry is None:
        return
    for fact in MODEL_FACTS:
        spec.values[f"model.{fact}"] = entry.get(fact)
    spec.values["model.num_experts"] = entry.get("num_experts", 0)
    spec.values["model.is_moe"] = entry.get("num_experts", 0) > 0
    spec.values["model.tie_embeddings"] = entry.get("tied", False)
    spec.values["model.params"] = param_count(entry)
    spec.values["model.known"] = True
    spec.values["model.called"] = f"{spec.values['model.name']} {spec.values['model.flavor']} "


def pipeline_plan(spec: Spec, res: Resolution) -> dict:
    from meshlint.mesh import pipeline

    v = spec.values
    return pipeline.torchtitan(res.degrees.get("pp"), v.get("model.n_layers"), v.get("pp_schedule"),
                               v.get("pp_layers_per_stage"), v.get("pp_first_stage_less_layers"),
                               v.get("pp_last_stage_less_layers"), v.get("training.local_batch_size"),
                               v.get("pp_microbatch_size"))


def bytes_per_param(spec: Spec) -> int | None:
    """FP32 master weights, gradients and AdamW moments (training.dtype = "bfloat16" halves them)."""
    dtype = spec.values.get("training.dtype")
    return None if dtype is None else (16 if dtype == "float32" else 8)


def spec_from_degrees(degrees: dict, **other_values) -> Spec:
    """A Spec as if a [parallelism] table held these degrees (plus [training]/[model]/[compile] values by key name)."""
    return toml_spec_from_degrees(read, KEYS, DEGREE_KEYS, VERSION, degrees, **other_values)


def toml_spec_from_degrees(read_fn, keys: list, degree_keys: dict, version: str, degrees: dict,
                           **other_values) -> Spec:
    """``spec_from_degrees`` of a TOML-era version: its ``read`` on a [parallelism] table of these degrees."""
    data: dict = {}
    for name, value in degrees.items():
        if name not in degree_keys:
            raise ValueError(f"torchtitan {version} has no degree {name!r} (it has {', '.join(degree_keys)})")
        data.setdefault("parallelism", {})[degree_keys[name].split(".", 1)[1]] = value
    for name, value in other_values.items():
        paths = [k.path for k in keys if k.leaf == name or k.path == name]
        if len(paths) != 1:
            raise ValueError(f"torchtitan {version}: {name!r} names " + (f"several keys ({', '.join(paths)})" if paths
                                                                          else "no key meshlint reads"))
        section, leaf = paths[0].split(".", 1)
        data.setdefault(section, {})[leaf] = value

    class _Toml:
        pass

    source = _Toml()
    source.data = data
    spec = read_fn(source)
    spec.framework = {"name": "torchtitan", "version": version, "decided_by": None}
    return spec


def _validate_degrees(d: dict, validated: tuple = _VALIDATED) -> str | None:
    """ParallelDims._validate's range checks (the same words from v0.1.0 to v0.2.x)."""
    for name in validated:
        if d[name] is not None and d[name] < 1:
            return "AssertionError: Parallelism degree should be >= 1, except for dp_shard"
    ds = d["dp_shard"]
    if ds is not None and not (ds == -1 or ds >= 1):
        return "AssertionError: dp_shard must -1 or >=1."
    return None


def resolve(spec: Spec, world: int | None) -> Resolution:
    res, world = settle(spec, world, FACTORS + ("ep", "etp"))
    if world is None:
        return res
    d = res.degrees
    if d["ep"] > 1 and d["etp"] not in (d["tp"], 1):
        res.framework_error = "AssertionError: Currently we only support ETP=TP or ETP=1"
        res.error_stage = "resolve"
        return res
    _build(d, world, res)
    return res


def settle(spec: Spec, world: int | None, names: tuple) -> tuple:
    """(Resolution, world): ParallelDims._validate up to its product assert, the same from v0.1.0 to v0.2.x
    (``names``: the degrees the version has). The world is None when nothing more resolves (the reason, or
    the framework's refusal, is on the Resolution)."""
    d = dict(spec.degrees)
    res = Resolution(degrees=d, world_factors=_factors(d, d["dp_shard"] == -1))
    unread = spec.extra.get("unread_degrees")
    if unread:  # a launch line sets them from values the script does not determine
        res.notes.append(f"{', '.join(unread)} set by the launch line to values meshlint cannot see: the meshes "
                         "are not resolved")
        return res, None
    if not usable(spec, res, names):
        return res, None
    d = res.degrees
    rest = d["dp_replicate"] * d["cp"] * d["tp"] * d["pp"]
    inferred = d["dp_shard"] == -1
    world = settle_dp_shard(res, world, inferred, rest, _valid_worlds(d, rest, inferred), _factors)
    if world is None:
        return res, None
    if prod(d[n] for n in FACTORS) != world:
        res.framework_error = (
            "AssertionError: Invalid parallel dims: "
            + " * ".join(f"{n}({d[n]})" for n in FACTORS)
            + f" != WORLD_SIZE({world})"
        )
        res.error_stage = "resolve"
        return res, None
    return res, world


def _factors(d: dict, inferred: bool) -> list:
    return [(n, d[n], inferred and n == "dp_shard") for n in FACTORS]


def _valid_worlds(d: dict, rest: int, inferred: bool) -> tuple:
    ep, etp = d.get("ep", 1), d.get("etp", 1)  # v0.1.0 has neither
    if ep > 1 and etp not in (d["tp"], 1):
        return ("none", "etp must equal tp or 1 when ep > 1")
    expert = etp * ep
    if not inferred:
        fsdp_tp = d["dp_shard"] * d["cp"] * d["tp"]
        if fsdp_tp % expert:
            return ("none", f"dp_shard·cp·tp = {fsdp_tp} is not divisible by etp·ep = {expert}")
        return ("exact", d["dp_shard"] * rest)
    # dp_shard = k: the sparse mesh needs k·cp·tp divisible by etp·ep.
    step = expert // gcd(expert, d["cp"] * d["tp"])
    return ("multiple", rest * step)


def _build(d: dict, world: int, res: Resolution) -> None:
    batch = d["dp_replicate"] * d["dp_shard"]
    fsdp = d["dp_shard"] * d["cp"]
    efsdp = fsdp * d["tp"] // (d["etp"] * d["ep"])
    dataloading = Mesh("dataloading", ("pp", "batch", "cp", "tp"), (d["pp"], batch, d["cp"], d["tp"]))
    dense = Mesh("dense", ("pp", "dp_replicate", "fsdp", "tp"), (d["pp"], d["dp_replicate"], fsdp, d["tp"]))
    sparse = Mesh("sparse", ("pp", "dp_replicate", "efsdp", "ep", "etp"),
                  (d["pp"], d["dp_replicate"], efsdp, d["ep"], d["etp"]))
    d.update(batch=batch, fsdp=fsdp, efsdp=efsdp)
    res.meshes = {"dataloading": dataloading, "dense": dense}
    res.primary = "dense"
    res.axes = {
        "pp": dataloading.axis("pp"),
        "batch": dataloading.axis("batch"),
        "loss": flattened(dataloading, ("batch", "cp"), "loss"),
        "dp_replicate": dense.axis("dp_replicate"),
        "fsdp": dense.axis("fsdp"),
        "cp": dataloading.axis("cp"),
        "tp": dataloading.axis("tp"),
    }
    whole = fsdp * d["tp"] % (d["etp"] * d["ep"]) == 0 and efsdp >= 1
    if sparse.size != world or not whole:
        res.meshes["sparse"] = None
        res.framework_error = (
            f"ValueError in DeviceMesh._unflatten: sparse mesh (pp, dp_replicate, efsdp, ep, etp) = "
            f"{sparse.sizes} covers {sparse.size} ranks, not {world}: efsdp = fsdp·tp // (etp·ep) = "
            f"{fsdp}·{d['tp']} // ({d['etp']}·{d['ep']}) = {efsdp} is not whole"
        )
        res.error_stage = "mesh"
    else:
        res.meshes["sparse"] = sparse
        for dim in ("ep", "efsdp", "etp"):
            res.axes[dim] = sparse.axis(dim)
    res.notes.append(f"batch = dp_replicate·dp_shard = {batch}; fsdp = dp_shard·cp = {fsdp}; "
                     f"efsdp = fsdp·tp/(etp·ep) = {fsdp * d['tp']}/{d['etp'] * d['ep']}"
                     + (f" = {efsdp}" if whole else " (not whole)"))
    res.notes.append(f"loss = batch·cp = {batch * d['cp']} (flattened from dataloading[batch, cp])")
    res.submeshes = _submeshes(d)


def _submeshes(d: dict) -> list:
    """What ``get_optional_mesh(name)`` returns: None unless enabled (efsdp with ep > 1; others when > 1)."""
    sizes = {"pp": d["pp"], "batch": d["batch"], "loss": d["batch"] * d["cp"], "dp_replicate": d["dp_replicate"],
             "fsdp": d["fsdp"], "cp": d["cp"], "tp": d["tp"], "ep": d["ep"], "efsdp": d["efsdp"], "etp": d["etp"]}
    out = []
    for name in ONE_D:
        # ParallelDims._mesh_exist at v0.2.x: efsdp iff ep > 1, every other name iff its size > 1
        enabled = d["ep"] > 1 if name == "efsdp" else sizes[name] > 1
        out.append((f'get_optional_mesh("{name}")', f"{sizes[name]} ranks" if enabled else "None (size 1)"))
    return out
