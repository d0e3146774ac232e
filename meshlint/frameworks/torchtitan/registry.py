"""What torchtitan's registry-era versions share: reading a Trainer.Config, resolving ParallelDims.

A version module (``torchtitan_v030``, ``torchtitan_main``) is a ``Version``
record -- its keys with their defaults, the spmd backends its ParallelDims
knows, whether ParallelDims checks that ep divides ``dp_shard*cp*tp``, its
value checks, its model_registry facts -- plus one-line functions that call
the ones here. Adding the next torchtitan release is writing one such module
and a row in ``versions.py``; a change of mesh layout is a new ``Layout``.

The input is a PySource (or anything with ``data``; see the plan in
docs): ``data`` holds plain Python literals keyed by dataclass field names,
``unknown_of(path)`` says what could not be read statically. An unreadable
value is None (unknown) in the Spec and listed in ``spec.unreadable``; it is
never replaced by a default.
"""

from __future__ import annotations

from math import gcd, prod
from typing import Any, NamedTuple

from meshlint.frameworks.base import (
    Key,
    Resolution,
    Spec,
    flattened,
    settle_dp_shard,
    type_of,
    unknown_keys,
    usable,
)
from meshlint.mesh.devmesh import Axis, Mesh

NAME = "torchtitan"
SECTION = "parallelism"
# Trainer.Config's sub-configs are kw_only dataclasses (and tyro rejects unknown flags), so an
# unknown field in any of these sections fails at config construction -- unless the registry
# builds the section from a subclass (graph_trainer's GraphTrainerCompileConfig adds ``mode``).
STRICT_SECTIONS = ("parallelism", "training", "compile")
SECTION_CLASSES = {"parallelism": "ParallelismConfig", "training": "TrainingConfig", "compile": "CompileConfig"}
FACTORS = ("dp_replicate", "dp_shard", "cp", "tp", "pp")  # the order of ParallelDims' assert message
DEGREES = ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep")
P = "parallelism."
DEGREE_KEYS = {"dp_replicate": P + "data_parallel_replicate_degree", "dp_shard": P + "data_parallel_shard_degree",
               "tp": P + "tensor_parallel_degree", "pp": P + "pipeline_parallel_degree",
               "cp": P + "context_parallel_degree", "ep": P + "expert_parallel_degree"}
SHORT_NAMES = {"dp_replicate": "data_parallel_replicate_degree", "dp_shard": "data_parallel_shard_degree",
               "fsdp": "data_parallel_shard_degree", "tp": "tensor_parallel_degree", "pp": "pipeline_parallel_degree",
               "cp": "context_parallel_degree", "ep": "expert_parallel_degree",
               "microbatches": "num_pp_microbatches"}
MODEL_FACTS = ("n_layers", "n_heads", "n_kv_heads", "dim", "head_dim", "vocab_size", "ffn_hidden_dim",
               "num_experts", "moe_hidden_dim", "attention", "source",
               "vision_n_heads", "linear_key_heads", "linear_value_heads",  # heads tp must divide as well
               "rope_max_len",
               "attn_masks", "attn_mask_keys")  # what get_attention_masks gives under flex (the ptrr balancer)
# ModelSpec names that differ from the registry module name (models/kimi_k2_7 builds "kimi_k2_5")
MODEL_ALIASES = {"kimi_k2_7": "kimi_k2_5", "kimi_k2_5": "kimi_k2_7"}


class Layout(NamedTuple):
    """How ``ParallelDims.build_mesh`` lays out the dense side under one spmd backend."""

    dense: tuple            # dims of the global mesh named "dense" (unflattened from the world)
    fwdbwd: bool            # also (pp, dp, cp, tp) from the world, sliced to spmd_dense_for_fwdbwd (dp, cp, tp)
    sparse_view: bool       # spmd_sparse_for_fwdbwd = sparse[dp_replicate, efsdp, ep] when ep > 1
    keep_dp_shard: bool     # _mesh_exist("dp_shard") is always true (FSDP storage axis)
    dense_axes: tuple       # 1-D meshes named after the common ones: (name, global mesh it comes from)
    spmd_dense_axes: tuple  # candidate_spmd_dense_axes (0.3.0's spmd_meshes())


LAYOUTS = {
    "spmd_types": Layout(("pp", "dp_replicate", "dp_shard", "cp", "tp"), True, True, True,
                         (("dp", "spmd_dense_for_fwdbwd"), ("dp_shard", "dense")), ("dp", "cp", "tp")),
    "full_dtensor": Layout(("pp", "dp_replicate", "dp_shard", "cp", "tp"), False, False, True,
                           (("dp_shard", "dense"),), ("dp_replicate", "dp_shard", "cp", "tp")),
    "partial_dtensor": Layout(("pp", "dp_replicate", "fsdp", "tp"), False, False, False,
                              (("fsdp", "dense"),), ("dp_replicate", "fsdp", "tp")),
}


class Check(NamedTuple):
    """A value a dataclass ``__post_init__`` (or Trainer.Config's) rejects: ``kind`` is
    gt0 (> 0), gt0_or_m1 (-1 or > 0) or nonempty (not "")."""

    path: str
    kind: str
    expected: str
    message: str            # the framework's own error, quoted
    cite: str


class Version(NamedTuple):
    """Everything that makes one torchtitan version read and resolve a config its own way."""

    version: str            # the id in versions.py ("0.3.0", "main@b5bcd76c6")
    keys: list              # Key(path, type, default, fact, choices): type int|bool|str|float|array, '?' = may be None
    backends: tuple         # spmd_backend values its ParallelismConfig accepts
    backend_error: str      # what it raises for another value
    ep_must_divide: bool    # ParallelDims._validate raises when ep does not divide dp_shard*cp*tp
    spmd_meshes: bool       # build_mesh also computes spmd_meshes() (activated dense and sparse)
    checks: tuple           # Check records
    models: dict            # model (ModelSpec name) -> its model_registry facts at this version
    microbatches: str       # "batch": local_batch_size // pipeline_parallel_microbatch_size;
    #                         "count": num_pp_microbatches
    renamed: dict = {}      # field names of other versions -> this version's (a did-you-mean for ML108)


# ----------------------------------------------------------------------------- reading

_WORDS = {"int": "an integer", "bool": "true or false (True/False)", "str": "a string", "float": "a number",
          "array": "a list"}


def _type_ok(kind: str, value: Any) -> bool:
    if value is None:
        return kind.endswith("?")
    kind = kind.rstrip("?")
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    return isinstance(value, (list, tuple))


def _shown(raw: Any) -> str:
    if isinstance(raw, (dict, list, tuple)):
        return ""
    if isinstance(raw, str):
        return '"' + raw.replace('"', '\\"') + '"'
    return repr(raw)[:60]


def _problem(key: str, expected: str, raw: Any, note: str) -> dict:
    return {"key": key, "expected": expected, "actual": "null" if raw is None else type_of(raw),
            "value": _shown(raw)[:60], "note": note}


def _lookup(data: Any, path: str) -> tuple:
    node = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _unknown(source, path: str):
    finder = getattr(source, "unknown_of", None)
    return finder(path) if finder is not None else None


def read(v: Version, source) -> Spec:
    """The config as this version loads it: defaults applied, unreadable values None and listed."""
    spec = Spec(dialect=NAME)
    spec.framework = {"name": NAME, "version": v.version, "decided_by": None}
    data = source.data if isinstance(getattr(source, "data", None), dict) else {}
    has_key = getattr(source, "has_key", None)
    unread: dict = {}  # (reason, line, col) -> [keys]: one entry per thing that could not be followed
    unread_facts: set = set()
    checks = {c.path: c for c in v.checks}
    for key in v.keys:
        fact = key.fact or key.path
        gone = _unknown(source, key.path)
        if gone is not None:
            unread.setdefault((getattr(gone, "reason", str(gone)), getattr(gone, "line", 1),
                               getattr(gone, "col", 1)), []).append(key.path)
            unread_facts.add(fact)
            spec.values[fact] = None
            continue
        present, raw = _lookup(data, key.path)
        spec.values[fact] = _checked(v, key, raw, checks.get(key.path), spec) if present else key.default
    spec.unreadable = [{"key": _common(keys), "reason": reason, "line": line, "col": col}
                       for (reason, line, col), keys in unread.items()]
    types = getattr(source, "types", None) or {}
    strict = tuple(s for s in STRICT_SECTIONS if not isinstance(types.get(s), str)
                   or types[s].rsplit(".", 1)[-1] == SECTION_CLASSES[s])
    from meshlint.frameworks import schema_check

    # every section against the generated schema (the class each was built from); without one, the
    # sections whose fields meshlint lists
    if not schema_check.apply_registry(spec, source, v.version, v.keys, {**SHORT_NAMES, **v.renamed}):
        unknown_keys(data, strict, v.keys, spec, {**SHORT_NAMES, **v.renamed})
    # Trainer.Config (and its subclasses: FluxTrainer, GraphTrainer, kimi's) validates itself and
    # runs torchtitan.trainer.Trainer; an RL controller's PolicyTrainer.Config (nested_under
    # "trainer") is a plain Configurable.Config: no CUDA graphs, none of the Trainer's checks.
    cls = types.get("")
    spec.values["trainer.config_class"] = cls if isinstance(cls, str) else None
    spec.values["trainer.runs_trainer"] = getattr(source, "nested_under", None) != "trainer"
    table = data.get("parallelism") if isinstance(data.get("parallelism"), dict) else {}
    for name, path in DEGREE_KEYS.items():
        spec.degrees[name] = spec.values.pop(name)
        spec.degree_keys[name] = path
        spec.degree_present[name] = bool(has_key(path)) if has_key else path.split(".", 1)[1] in table
    spec.degrees["etp"] = None  # expert tensor parallelism is gone in the registry era
    spec.extra["unread_degrees"] = [n for n in DEGREE_KEYS if n in unread_facts]
    _model_defaults(v, spec, unread_facts)
    spec.extra["unread_model_args"] = sorted(f for f in unread_facts if f.startswith("model."))
    _converters(v, spec, types, source)
    spec.values["model.known"] = False
    spec.load_error = _validate_degrees(spec.degrees)
    return spec


def _common(keys: list) -> str:
    """The dotted prefix the keys share (``parallelism`` for every parallelism key), or the one key."""
    if len(keys) == 1:
        return keys[0]
    parts = [k.split(".") for k in keys]
    common = []
    for column in zip(*parts):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    if common:
        return ".".join(common)
    sections = list(dict.fromkeys(k.split(".", 1)[0] for k in keys))
    return ", ".join(f"{section}.*" for section in sections)  # e.g. a config rebuilt by reflection


def _checked(v: Version, key: Key, raw: Any, check: Check | None, spec: Spec) -> Any:
    if not _type_ok(key.type, raw):
        word = _WORDS[key.type.rstrip("?")] + (" or None" if key.type.endswith("?") else "")
        spec.problems.append(_problem(key.path, word, raw, f"torchtitan {v.version} expects {word} here"))
        return None
    if key.choices and raw not in key.choices:
        note = (v.backend_error if key.path == P + "spmd_backend"
                else f"torchtitan {v.version} accepts only these values")
        spec.problems.append(_problem(key.path, "one of " + ", ".join(map(repr, key.choices)), raw, note))
        return None
    if check is not None and not _passes(check.kind, raw):
        spec.problems.append(_problem(key.path, check.expected, raw, f"torchtitan raises {check.message}"))
        return None
    if key.type.rstrip("?") == "float" and raw is not None:
        return float(raw)
    return list(raw) if isinstance(raw, tuple) else raw


def _passes(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if kind == "gt0":
        return value > 0
    if kind == "gt0_or_m1":
        return value == -1 or value > 0
    return value != ""


def _validate_degrees(d: dict) -> str | None:
    """ParallelDims._validate's first two asserts (meshlint's ML102 says which degree)."""
    for name in ("dp_replicate", "cp", "tp", "pp", "ep"):
        if d[name] is not None and d[name] < 1:
            return "AssertionError: Parallelism degree should be >= 1, except for dp_shard"
    ds = d["dp_shard"]
    if ds is not None and not (ds == -1 or ds >= 1):
        return "AssertionError: dp_shard must -1 or >=1."
    return None


def _model_defaults(v: Version, spec: Spec, unread: set) -> None:
    """The model_registry arguments the rules need, defaulted the way this version's model_registry does."""
    vals = spec.values
    name = vals.get("model.name")
    facts = v.models.get(name) or v.models.get(MODEL_ALIASES.get(name, "")) if isinstance(name, str) else None
    vals["model.pipelining"] = None if facts is None else facts["pipelining"] is not None
    vals["model.pipelining_fn"] = None if facts is None else facts["pipelining"]
    vals["model.family"] = None if facts is None else facts.get("family", name)
    for arg in ("attn_backend", "moe_comm_backend"):
        path = "model." + arg
        if path in unread:
            continue
        if vals.get(path) is None:
            vals[path] = None if facts is None else facts.get(arg)


def _converters(v: Version, spec: Spec, types: dict, source=None) -> None:
    """``model.converters``: each converter model_registry applies, as written ({field: value}), plus
    ``class`` (as written, "LoRAConverter.Config"), ``name`` (the converter class: "LoRAConverter"), and
    from the generated table ``kind`` (quantization | lora | other) and ``pads_dispatcher``; null for a
    class the table does not list. Null as a whole when the list or one of its items could not be read.
    A field of a converter that could not be read is null (and listed as unreadable); a field set to
    torchtitan's ``nvfp4_bf16_tail_fqns(n, f)`` is null too, and the call is ``fqns_call``:
    {function, num_layers (null until the model table gives it: layers_of), layers_of {name, flavor},
    bf16_tail_fraction, line}, for the NVFP4 rules to decide (ML915, ML916)."""
    items = spec.values.get("model.converters")
    if not isinstance(items, list):
        return
    from meshlint.frameworks import models

    table = models.converters(v.version)
    unknown = getattr(source, "unknown", None) or {}
    calls = getattr(source, "calls", None) or {}
    out = []
    for i, item in enumerate(items):
        cls = types.get(f"model.converters[{i}]")
        if not isinstance(item, dict) or not isinstance(cls, str):
            spec.values["model.converters"] = None
            return
        parts = cls.split(".")
        name = parts[-2] if len(parts) > 1 and parts[-1] == "Config" else parts[-1]
        known = table.get(name) or {}
        entry = {**item, "class": cls, "name": name, "kind": known.get("kind"),
                 "pads_dispatcher": known.get("pads_dispatcher"), "fqns_call": None}
        prefix = f"model.converters[{i}]."
        for path, gone in unknown.items():
            if not path.startswith(prefix) or "." in path[len(prefix):] or "[" in path[len(prefix):]:
                continue
            field = path[len(prefix):]
            entry[field] = None
            call = calls.get(path)
            if field == "fqns" and isinstance(call, dict):
                entry["fqns_call"] = {k: call.get(k) for k in ("function", "num_layers", "layers_of",
                                                                "bf16_tail_fraction", "line")}
                continue  # decided by the rules, not unreadable
            spec.unreadable.append({"key": path, "reason": getattr(gone, "reason", str(gone)),
                                    "line": getattr(gone, "line", 1), "col": getattr(gone, "col", 1)})
        out.append(entry)
    spec.values["model.converters"] = out


def spec_from_degrees(v: Version, degrees: dict, **other_values) -> Spec:
    """A Spec as if a registry had set these degrees (short names) and other fields (by field name).

    ``spec_from_degrees({"tp": 2, "dp_shard": -1}, spmd_backend="partial_dtensor")``: degrees not
    given keep their defaults; each other value is matched to the one key whose field name
    (or dotted path) it is.
    """
    data: dict = {}
    for name, value in degrees.items():
        if name not in DEGREE_KEYS:
            if name == "etp" and value in (None, 1):
                continue  # harnesses that share one degree table across versions
            raise ValueError(f"torchtitan {v.version} has no degree {name!r} (it has {', '.join(DEGREE_KEYS)})")
        _put(data, DEGREE_KEYS[name], value)
    by_leaf: dict = {}
    for key in v.keys:
        by_leaf.setdefault(key.path.rsplit(".", 1)[1], []).append(key.path)
        by_leaf.setdefault(key.path, []).append(key.path)
    for name, value in other_values.items():
        paths = by_leaf.get(name, [])
        if len(paths) != 1:
            raise ValueError(f"torchtitan {v.version}: {name!r} names "
                             + (f"several keys ({', '.join(paths)})" if paths else "no key meshlint reads"))
        _put(data, paths[0], value)
    return read(v, _Values(data))


def _put(data: dict, path: str, value: Any) -> None:
    *heads, leaf = path.split(".")
    node = data
    for head in heads:
        node = node.setdefault(head, {})
    node[leaf] = value


class _Values:
    """A source made of plain values (spec_from_degrees): everything readable, nothing positioned."""

    def __init__(self, data: dict):
        self.data = data
        self.path = self.name = "<degrees>"
        self.text = ""
        self.comments: list = []

    def unknown_of(self, path: str):
        return None

    def has_key(self, path: str) -> bool:
        return _lookup(self.data, path)[0]

    def locate(self, key) -> tuple:
        return (1, 1)


# ----------------------------------------------------------------------------- the model

def attach_model(v: Version, spec: Spec, table: dict) -> None:
    """Model sizes from meshlint's table (``model.name`` / ``model.flavor``), when it has them."""
    from meshlint.frameworks.models import lookup, param_count

    name, flavor = spec.values.get("model.name"), spec.values.get("model.flavor")
    if not isinstance(name, str) or not isinstance(flavor, str) or table is None:
        return
    entry = lookup(table, name, flavor)
    if entry is None and name in MODEL_ALIASES:
        entry = lookup(table, MODEL_ALIASES[name], flavor)
    if entry is None:
        return
    vals = spec.values
    for fact in MODEL_FACTS:
        vals[f"model.{fact}"] = entry.get(fact)
    vals["model.num_experts"] = entry.get("num_experts", 0)
    vals["model.is_moe"] = entry.get("num_experts", 0) > 0
    vals["model.tie_embeddings"] = entry.get("tied", False)
    try:  # entries of models built from a Hugging Face config at run time lack vocab_size and more
        vals["model.params"] = entry.get("params") or param_count(entry)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        vals["model.params"] = None
    if vals.get("model.pipelining") is None and isinstance(entry.get("pipelining"), bool):
        vals["model.pipelining"] = entry["pipelining"]  # models this version module does not list
    vals["model.known"] = True
    vals["model.called"] = f"{name} {flavor} "
    _linears(spec, entry, table)


def _linears(spec: Spec, entry: dict, table: dict) -> None:
    """``model.linears``, the flavor's Linear.Config nodes by FQN (meshlint.frameworks.models.linear_fact), as
    model_registry(flavor) builds them with its defaults: null where the call passes an argument that adds
    Linears (deepseek_v3's num_mtp_layers), or one that could not be read, and when it applies no converter. The other arguments
    (attn_backend, moe_comm_backend, tp_gemm_backend) leave every Linear as it is (checked against the real
    traverse, tests/test_schema_generated.py). And each NVFP4 ``fqns_call`` on len(<model spec>.model.layers)
    gets that flavor's layer count from the same table."""
    from meshlint.frameworks.models import linear_fact, lookup

    vals = spec.values
    unread = set(spec.extra.get("unread_model_args") or ())
    mtp = vals.get("model.num_mtp_layers")
    ok = "model.num_mtp_layers" not in unread and mtp in (None, 0)
    # only a converter swaps Linears: without one the fact is never read, so it is not worked out (up to ~2 ms
    # for a large flavor, on the path of every registry config)
    converts = bool(vals.get("model.converters"))
    vals["model.linears"] = linear_fact(entry.get("linears")) if ok and converts else None
    for conv in vals.get("model.converters") or []:
        call = conv.get("fqns_call") if isinstance(conv, dict) else None
        of = call.get("layers_of") if isinstance(call, dict) else None
        if isinstance(of, dict):
            other = lookup(table, of.get("name"), of.get("flavor"))
            if other is None and of.get("name") in MODEL_ALIASES:
                other = lookup(table, MODEL_ALIASES[of["name"]], of.get("flavor"))
            layers = other.get("n_layers") if other else None
            call["num_layers"] = layers if isinstance(layers, int) else None


def pipeline_plan(v: Version, spec: Spec, res: Resolution) -> dict:
    from meshlint.mesh import pipeline

    vals = spec.values
    if v.microbatches == "count":
        # main: the schedule gets num_pp_microbatches directly (pipeline_parallel.py pipeline_llm)
        count = vals.get(P + "num_pp_microbatches")
        plan = pipeline.torchtitan(res.degrees.get("pp"), vals.get("model.n_layers"),
                                   vals.get(P + "pipeline_parallel_schedule"),
                                   vals.get(P + "pipeline_parallel_layers_per_stage"),
                                   vals.get(P + "pipeline_parallel_first_stage_less_layers"),
                                   vals.get(P + "pipeline_parallel_last_stage_less_layers"), count, 1)
        plan["microbatch_size"] = None  # a microbatch is num_tokens_per_microbatch_per_dp_rank tokens
        plan["microbatches_key"] = P + "num_pp_microbatches"
        return plan
    plan = pipeline.torchtitan(res.degrees.get("pp"), vals.get("model.n_layers"),
                               vals.get(P + "pipeline_parallel_schedule"),
                               vals.get(P + "pipeline_parallel_layers_per_stage"),
                               vals.get(P + "pipeline_parallel_first_stage_less_layers"),
                               vals.get(P + "pipeline_parallel_last_stage_less_layers"),
                               vals.get("training.local_batch_size"),
                               vals.get(P + "pipeline_parallel_microbatch_size"))
    plan["microbatches_key"] = "training.local_batch_size"
    return plan


def bytes_per_param(spec: Spec) -> int | None:
    """FP32 master weights, gradients and AdamW moments (training.dtype = "bfloat16" halves them)."""
    dtype = spec.values.get("training.dtype")
    return None if dtype is None else (16 if dtype == "float32" else 8)


# ----------------------------------------------------------------------------- resolving

def resolve(v: Version, spec: Spec, world: int | None) -> Resolution:
    """The meshes this version's ``ParallelDims(...).build_mesh()`` builds, or the error it raises."""
    d = {name: spec.degrees.get(name) for name in DEGREES}
    d["etp"] = None
    inferred = d["dp_shard"] == -1
    res = Resolution(degrees=d, world_factors=_factors(d, inferred))
    unread = spec.extra.get("unread_degrees") or []
    if unread:
        res.notes.append(f"{', '.join(unread)} could not be read statically: the meshes are not resolved")
        return res
    if not usable(spec, res, FACTORS + ("ep",)):
        return res
    d = res.degrees
    rest = d["dp_replicate"] * d["cp"] * d["tp"] * d["pp"]
    world = settle_dp_shard(res, world, inferred, rest, _valid_worlds(d, rest, inferred), _factors)
    if world is None:
        return res
    if prod(d[n] for n in FACTORS) != world:
        res.framework_error = ("AssertionError: Invalid parallel dims: "
                               + " * ".join(f"{n}({d[n]})" for n in FACTORS) + f" != WORLD_SIZE({world})")
        res.error_stage = "resolve"
        return res
    region = d["dp_shard"] * d["cp"] * d["tp"]
    if v.ep_must_divide and region % d["ep"]:
        res.framework_error = (f"ValueError: expert_parallel_degree ({d['ep']}) must divide "
                               f"dp_shard * cp * tp ({region})")
        res.error_stage = "resolve"
        return res
    backend = spec.values.get(P + "spmd_backend")
    _build(v, d, world, res, LAYOUTS.get(backend) if backend in v.backends else None, backend)
    return res


def _factors(d: dict, inferred: bool) -> list:
    return [(n, d[n], inferred and n == "dp_shard") for n in FACTORS]


def _valid_worlds(d: dict, rest: int, inferred: bool) -> tuple:
    """Worlds on which the product holds and the sparse mesh tiles them (ep | dp_shard*cp*tp)."""
    if not inferred:
        region = d["dp_shard"] * d["cp"] * d["tp"]
        if region % d["ep"]:
            return ("none", f"dp_shard·cp·tp = {region} is not divisible by ep = {d['ep']}")
        return ("exact", d["dp_shard"] * rest)
    step = d["ep"] // gcd(d["ep"], d["cp"] * d["tp"])
    return ("multiple", rest * step)


def _build(v: Version, d: dict, world: int, res: Resolution, layout: Layout | None, backend) -> None:
    """``build_mesh``: world -> dataloading, loss, dense (per backend), sparse, and the spmd views."""
    pp, dr, ds, cp, tp, ep = (d[n] for n in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"))
    batch, fsdp = dr * ds, ds * cp
    region = fsdp * tp
    efsdp = region // ep
    d.update(batch=batch, fsdp=fsdp, efsdp=efsdp)
    size = {"pp": pp, "dp_replicate": dr, "dp_shard": ds, "cp": cp, "tp": tp, "fsdp": fsdp, "batch": batch,
            "dp": batch, "loss": batch * cp, "ep": ep, "efsdp": efsdp}
    dataloading = Mesh("dataloading", ("pp", "batch", "cp", "tp"), (pp, batch, cp, tp))
    res.meshes = {"dataloading": dataloading}
    glob: dict = {"dataloading": (dataloading.dims, dataloading.sizes), "loss": (("loss_mesh",), (batch * cp,))}
    axes = {"pp": dataloading.axis("pp"), "batch": dataloading.axis("batch"),
            "loss": flattened(dataloading, ("batch", "cp"), "loss")}
    dense = None
    if layout is not None:
        dense = Mesh("dense", layout.dense, tuple(size[x] for x in layout.dense))
        res.meshes["dense"] = dense
        glob["dense"] = (dense.dims, dense.sizes)
        axes["dp_replicate"] = dense.axis("dp_replicate")
        res.primary = "dense"
    else:
        res.primary = "dataloading"
        res.notes.append(f"spmd_backend = {backend!r} is not one torchtitan {v.version} knows "
                         f"({', '.join(v.backends)}): the dense mesh is not resolved")
    axes["cp"], axes["tp"] = dataloading.axis("cp"), dataloading.axis("tp")
    sparse = Mesh("sparse", ("pp", "dp_replicate", "efsdp", "ep"), (pp, dr, efsdp, ep))
    whole = region % ep == 0
    res.notes.append(f"batch = dp_replicate·dp_shard = {batch}; efsdp = dp_shard·cp·tp / ep = {region}/{ep}"
                     + (f" = {efsdp}" if whole else " (not whole)"))
    res.notes.append(f"loss = batch·cp = {batch * cp} (dataloading[batch, cp] flattened to 'loss_mesh')")
    if not whole:
        # 0.3.0 has no ep check: the sparse unflatten is what fails (torch device_mesh.py
        # _create_unflatten_mesh), after the dataloading and dense meshes were built
        res.meshes["sparse"] = None
        res.framework_error = (
            f"ValueError in DeviceMesh._unflatten, building the sparse mesh (pp, dp_replicate, efsdp, ep): "
            f"The product of mesh_sizes=({pp}, {dr}, {efsdp}, {ep}) is {pp * dr * efsdp * ep}, but the original "
            f"dimension at dim=0 has size {world}. These must be equal for unflatten to work correctly.")
        res.error_stage = "mesh"
        res.axes = axes
        return
    res.meshes["sparse"] = sparse
    glob["sparse"] = (sparse.dims, sparse.sizes)
    axes["ep"], axes["efsdp"] = sparse.axis("ep"), sparse.axis("efsdp")
    if layout is not None:
        if layout.fwdbwd:
            glob["spmd_dense_for_fwdbwd"] = (("dp", "cp", "tp"), (batch, cp, tp))
            res.notes.append(f"spmd_dense_for_fwdbwd = (dp, cp, tp) = ({batch}, {cp}, {tp}), dp = dp_replicate·"
                             f"dp_shard: one per pp stage, sliced from the world unflattened to (pp, dp, cp, tp)")
        if layout.sparse_view and ep > 1:
            glob["spmd_sparse_for_fwdbwd"] = (("dp_replicate", "efsdp", "ep"), (dr, efsdp, ep))
            res.notes.append(f"spmd_sparse_for_fwdbwd = sparse[dp_replicate, efsdp, ep] = ({dr}, {efsdp}, {ep}), "
                             f"one per pp stage")
        for name, mesh in layout.dense_axes:
            if mesh == "dense":
                axes[name] = dense.axis(name)
            else:  # dp of the (pp, dp, cp, tp) view: batch ranks, cp·tp apart
                axes[name] = Axis(name, batch, cp * tp, mesh, world)
        if "fsdp" in layout.dense:
            res.notes.append(f"fsdp = dp_shard·cp = {fsdp}")
    res.axes = axes
    res.global_meshes = glob
    res.submeshes = _submeshes(v, layout, size, ep, list(axes))


def _exists(layout: Layout | None, name: str, degree: int, ep: int) -> bool:
    """``ParallelDims._mesh_exist``: whether a 1-D mesh gets a real process group."""
    if name == "fsdp":
        return True
    if name == "dp_shard" and layout is not None and layout.keep_dp_shard:
        return True
    if name == "efsdp":
        return ep > 1
    return degree > 1


def _submeshes(v: Version, layout: Layout | None, size: dict, ep: int, names: list) -> list:
    out = []
    for name in names:
        n = size[name]
        if _exists(layout, name, n, ep):
            what = f"{n} rank{'s' if n != 1 else ''}"
        else:
            what = "None (size 1)" if n == 1 else f"None ({n} ranks on the fake backend: ep = 1)"
        out.append((f'get_optional_mesh("{name}")', what))
    if v.spmd_meshes and layout is not None:
        shown = []
        for candidates in (layout.spmd_dense_axes, ("dp_replicate", "efsdp", "ep")):
            active = [a for a in candidates if a in names and _exists(layout, a, size[a], ep)]
            if active:
                shown.append(f"({', '.join(active)}) {'×'.join(str(size[a]) for a in active)}")
        out.append(("spmd_meshes()", "[" + ", ".join(shown) + "]"))
    return out


def bound(v: Version) -> tuple:
    """A version module's entry points (read, resolve, attach_model, pipeline_plan, bytes_per_param,
    spec_from_degrees), each this module's function with the version's semantics ``v`` bound."""

    def read_(source):
        return read(v, source)

    def resolve_(spec, world):
        return resolve(v, spec, world)

    def attach_model_(spec, table):
        attach_model(v, spec, table)

    def pipeline_plan_(spec, res):
        return pipeline_plan(v, spec, res)

    def spec_from_degrees_(degrees, **other_values):
        return spec_from_degrees(v, degrees, **other_values)

    return read_, resolve_, attach_model_, pipeline_plan_, bytes_per_param, spec_from_degrees_
