"""KempnerForge: ``[distributed]`` configs, resolved like ``init_distributed`` does.

Facts mirrored from KempnerForge's own code (shared/DIALECTS.md):
* load: ``DistributedConfig.__post_init__`` rejects dp_shard 0 or < -1, then any
  other degree < 1; the TOML loader converts strings and floats for int fields
  (``int("4")``, ``int(4.7)``) and rejects unknown keys in every section;
* arithmetic: ``dp_replicate * dp_shard * tp * pp * cp * ep == world_size``
  (EP is its own factor); dp_shard = -1 -> ``world // (dp_replicate*tp*pp*cp*ep)``,
  which must divide exactly;
* mesh: fixed order ``pp, dp_replicate, dp_shard, ep, tp`` keeping sizes > 1;
  a size-1 dp_shard inserted before ep (or tp) when tp or ep > 1; a flat
  ``("dp_shard",)`` of the world if nothing is left; cp is not a mesh dim;
  no mesh at all when the world is one process.
* beyond the mesh: the experts' width (``moe_expert_ffn_multiplier``), the VLM sequence budget
  (image tokens × video frames + ``vlm.max_text_len``), ``[eval]``'s data source, and the overrides
  of launch lines in the file's comments written ``--key value`` (the parser takes ``--key`` as a
  flag set to "true" and drops the value).
"""

from __future__ import annotations

import math
from math import prod

from meshlint import fastre
from meshlint.frameworks.base import (
    Key,
    Resolution,
    Spec,
    axes_of,
    read_keys,
    settle_world,
    unknown_keys,
    usable,
)
from meshlint.limits import MAX_TOML_INT
from meshlint.mesh.devmesh import Mesh

NAME = "kempnerforge"
SECTION = "distributed"
STRICT_SECTIONS = ("distributed",)
ORDER = ("pp", "dp_replicate", "dp_shard", "ep", "tp")
FACTORS = ("dp_replicate", "dp_shard", "tp", "pp", "cp", "ep")  # the order of its error message

KEYS = [
    Key("distributed.dp_shard", "int", -1, "dp_shard", doc="FSDP degree; -1 fills the remaining ranks"),
    Key("distributed.dp_replicate", "int", 1, "dp_replicate", doc="HSDP replicate degree"),
    Key("distributed.tp", "int", 1, "tp", doc="tensor-parallel degree"),
    Key("distributed.pp", "int", 1, "pp", doc="pipeline-parallel degree"),
    Key("distributed.pp_schedule", "str", "1f1b", "pp_schedule", ("1f1b", "gpipe", "interleaved_1f1b")),
    Key("distributed.cp", "int", 1, "cp", doc="context-parallel degree (declared, not wired)"),
    Key("distributed.ep", "int", 1, "ep", doc="expert-parallel degree"),
    Key("distributed.nccl_timeout_sec", "int", 1800, None),
    Key("distributed.backend", "str", "cpu:gloo,cuda:nccl", None),
    Key("model.dim", "int", 4096, "model.dim"),
    Key("model.n_layers", "int", 32, "model.n_layers"),
    Key("model.n_heads", "int", 32, "model.n_heads"),
    Key("model.n_kv_heads", "int", None, "model.n_kv_heads", doc="defaults to n_heads"),
    Key("model.vocab_size", "int", 32000, "model.vocab_size"),
    Key("model.max_seq_len", "int", 2048, "model.max_seq_len"),
    Key("model.tie_embeddings", "bool", False, "model.tie_embeddings"),
    Key("model.num_experts", "int", 0, "model.num_experts", doc="0 = dense, > 0 = MoE"),
    Key("model.moe_top_k", "int", 2, "model.moe_top_k"),
    Key("model.moe_frequency", "int", 1, "model.moe_frequency", doc="MoE every N layers"),
    Key("model.moe_shared_experts", "int", 0, "model.shared_experts"),
    Key("model.ffn_dim_multiplier", "float", 1.0, "model.ffn_dim_multiplier"),
    Key("model.ffn_hidden_dim", "int", None, "model.ffn_hidden_dim", doc="overrides the computed FFN hidden dim"),
    Key("train.batch_size", "int", 8, "train.batch_size"),
    Key("train.seq_len", "int", 2048, "train.seq_len"),
    Key("train.grad_accum_steps", "int", 1, "train.grad_accum_steps"),
    Key("train.compile_model", "bool", True, "train.compile_model"),
    Key("train.mixed_precision", "str", "bf16", "train.mixed_precision", ("bf16", "fp16", "fp32", "fp8")),
    Key("vlm.arch", "str", "joint_decoder", "vlm.arch", ("cross_attention", "joint_decoder", "moma", "mot")),
]
DEGREE_KEYS = {k.fact: k.path for k in KEYS if k.fact in FACTORS}


def coerce(key: Key, raw) -> tuple:
    """What KempnerForge's ``_coerce_value`` makes of a value of the wrong type."""
    if key.type == "int":
        if isinstance(raw, bool):
            return int(raw), f"KempnerForge keeps the bool, which then counts as {int(raw)}"
        if isinstance(raw, str):
            try:
                value = int(raw)
            except ValueError:
                return None, f"KempnerForge fails to load it: int({raw!r}) is not a number"
            return value, f"KempnerForge converts the string to {value}"
        if isinstance(raw, float):
            if raw != raw or raw in (float("inf"), float("-inf")):
                return None, "KempnerForge fails to load it"
            value = int(raw)
            if value == raw:
                return value, f"KempnerForge converts it to {value}"
            return value, f"KempnerForge silently truncates it to {value}"
        return None, "KempnerForge crashes on it (an int is required)"
    if key.type == "bool":
        if isinstance(raw, str):
            value = raw.lower() in ("true", "1", "yes")
            return value, f"KempnerForge reads it as {str(value).lower()}"
        return bool(raw), f"KempnerForge reads it as {str(bool(raw)).lower()}"
    if key.type == "str":
        return None, "KempnerForge fails to load it"
    return None, "KempnerForge cannot use it"


KV_HEADS_DEFAULT = 32  # what an absent [model] n_kv_heads really is (see read)


def read(source) -> Spec:
    spec = Spec(dialect=NAME)
    read_keys(source.data, KEYS, coerce, spec)
    _out_of_range(spec)
    unknown_keys(source.data, STRICT_SECTIONS, KEYS, spec)
    for name in FACTORS:
        spec.degrees[name] = spec.values.pop(name)
        spec.degree_keys[name] = DEGREE_KEYS[name]
        spec.degree_present[name] = _present(source.data, DEGREE_KEYS[name])
    spec.degrees["etp"] = None  # KempnerForge has no expert tensor parallelism
    if spec.values.get("model.n_kv_heads") is None and _present(source.data, "model.n_kv_heads") is False:
        # Not n_heads: the loader lays the file over JobConfig() (loader.py:245), whose ModelConfig
        # already set n_kv_heads = its own n_heads = 32 (model.py:62); a file's n_heads does not redo it.
        spec.values["model.n_kv_heads"] = KV_HEADS_DEFAULT
        spec.values["model.n_kv_heads_defaulted"] = True
    spec.values["model.is_moe"] = _gt0(spec.values.get("model.num_experts"))
    # read here, not in KEYS: the schema check reports its type and range (a KEYS entry would hide the latter)
    spec.values["model.moe_expert_ffn_multiplier"] = _number(source.data.get("model"), "moe_expert_ffn_multiplier", 1.0)
    _derived_model_facts(spec.values, spec.problems)
    spec.values["vlm.present"] = isinstance(source.data.get("vlm"), dict)
    if not spec.values["vlm.present"]:
        spec.values["vlm.arch"] = None
    _vlm_facts(source.data, spec.values)
    _eval_facts(source.data.get("eval"), spec.values)
    spec.values["launch.space_overrides"] = space_overrides(getattr(source, "comments", None) or [], source.data)
    spec.values["launch.overrides"] = equals_overrides(getattr(source, "comments", None) or [])
    spec.values["launch.dashless_overrides"] = dashless_overrides(getattr(source, "comments", None) or [], source.data)
    spec.load_error = _load_error(spec.degrees)
    return spec


def _derived_model_facts(v: dict, problems: list | None = None) -> None:
    """FFN hidden dim and parameter count, the way KempnerForge's ModelConfig computes them."""
    dim, mult, explicit = v.get("model.dim"), v.get("model.ffn_dim_multiplier"), v.get("model.ffn_hidden_dim")
    if dim is not None and mult is not None:
        v["model.ffn_hidden_dim"] = kempnerforge_ffn_hidden(dim, mult, explicit)
        if v["model.ffn_hidden_dim"] is None and problems is not None:  # int(4 * dim * 2/3 * multiplier) overflowed
            problems.append(_range_problem("model.ffn_dim_multiplier", mult, "a number that keeps the FFN size finite",
                                           "KempnerForge's computed_ffn_hidden_dim overflows: int() of an infinite "
                                           "4 · dim · 2/3 · ffn_dim_multiplier"))
    # the [model] facts the estimate reads (those set, as a dict of all of them would hold them)
    m = {k: v[f] for k, f in _PARAMS_READS if f in v}
    m["moe_shared_experts"] = m.get("shared_experts")
    m["tie_embeddings"] = v.get("model.tie_embeddings")
    v["model.params"] = kempnerforge_params(m)
    if v.get("model.is_moe"):  # the experts' own width (model.py:127-138), routed and shared alike
        v["model.moe_hidden_dim"] = kempnerforge_expert_ffn_hidden(v.get("model.ffn_hidden_dim"),
                                                                   v.get("model.moe_expert_ffn_multiplier"))
    v["model.known"] = True
    v["model.source"] = "the config's [model] section"
    v["model.called"] = "model."


# every [model] fact kempnerforge_params reads (shared_experts as moe_shared_experts; tie_embeddings set apart)
_PARAMS_READS = tuple((k, "model." + k) for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                                  "ffn_hidden_dim", "num_experts", "moe_frequency",
                                                  "moe_expert_ffn_multiplier", "shared_experts"))


# KempnerForge's ModelConfig arithmetic (kempnerforge/config/model.py @ 5666d0d), here with the rest of its semantics
# (a check of KempnerForge configs imports no torchtitan model tables)

def kempnerforge_ffn_hidden(dim: int, multiplier: float, explicit: int | None) -> int:
    """KempnerForge's ``computed_ffn_hidden_dim``."""
    if explicit is not None:
        return explicit
    try:
        raw = int(4 * dim * (2 / 3) * multiplier)
    except (OverflowError, ValueError):  # nan, inf, or a dim past float range: KempnerForge fails here too
        return None
    return 256 * -(-raw // 256)  # math.ceil(raw / 256), without the float that overflows


def kempnerforge_expert_ffn_hidden(ffn_hidden: int | None, multiplier: float | None) -> int | None:
    """KempnerForge's ``computed_expert_ffn_hidden_dim``: ``max(16, 16 * round(int(h * m) / 16))``
    (kempnerforge/config/model.py:127-138 @ 5666d0d; routed and shared experts both use it)."""
    if ffn_hidden is None or multiplier is None:
        return None
    try:  # Python's round (half to even), as KempnerForge's
        return max(16, 16 * round(int(ffn_hidden * multiplier) / 16))
    except (OverflowError, ValueError):  # nan, inf or past float range: KempnerForge fails here too
        return None


def kempnerforge_params(m: dict) -> int | None:
    """KempnerForge's ``ModelConfig.num_params_estimate``."""
    needed = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "ffn_hidden_dim", "num_experts")
    if any(m.get(k) is None for k in needed):
        return None
    d, h, kv = m["dim"], m["ffn_hidden_dim"], m["n_kv_heads"]
    if m["n_heads"] == 0:
        return None  # KempnerForge divides by it: no estimate
    head = d // m["n_heads"]
    attn = d * (m["n_heads"] * head) + 2 * d * (kv * head) + (m["n_heads"] * head) * d
    mlp = 3 * d * h
    norm = 2 * d
    if m["num_experts"] > 0:
        every = m.get("moe_frequency") or 1
        # layers i+1 (i < n_layers) divisible by every, counted without walking the layers
        n_moe = m["n_layers"] // abs(every) if m["n_layers"] > 0 else 0
        # routed and shared experts are moe_expert_ffn_multiplier times the dense width (rounded to 16)
        he = kempnerforge_expert_ffn_hidden(h, m.get("moe_expert_ffn_multiplier", 1.0))
        if he is None:
            return None
        expert = 3 * d * he
        shared = (m.get("moe_shared_experts") or 0) * expert
        moe = attn + m["num_experts"] * expert + d * m["num_experts"] + shared + norm
        layers = n_moe * moe + (m["n_layers"] - n_moe) * (attn + mlp + norm)
    else:
        layers = m["n_layers"] * (attn + mlp + norm)
    return layers + m["vocab_size"] * d + (0 if m.get("tie_embeddings") else m["vocab_size"] * d) + d


def _out_of_range(spec: Spec) -> None:
    """Values no arithmetic may trust become invalid values (ML101) and unknown, before any is used.

    TOML promises 64-bit integers (larger ones make the file invalid by the spec,
    though tomllib reads them) and KempnerForge multiplies model sizes into
    floats, so a 400-digit ``dim`` or a ``nan`` multiplier fails its loader.
    Degrees are left to the range rule (ML102).
    """
    values = spec.values
    for fact, path in _RANGED:
        value = values.get(fact)
        if value is None or value.__class__ is int and -MAX_TOML_INT <= value <= MAX_TOML_INT:
            continue  # the usual cases, decided without the checks below
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            spec.problems.append(_range_problem(path, value, "a finite number",
                                                "KempnerForge fails to load it (int() of an infinite or NaN size)"))
            values[fact] = None
        elif isinstance(value, int) and abs(value) > MAX_TOML_INT:
            spec.problems.append(_range_problem(path, value, f"an integer within ±{MAX_TOML_INT:,}",
                                                "TOML integers are 64-bit (the TOML spec makes a larger one invalid), "
                                                "and KempnerForge overflows a float computing sizes from it"))
            values[fact] = None


# (fact, path) of each key _out_of_range looks at, listed once: a Record's fields read per key and config cost
# a first run ~0.9 M instructions
_RANGED = tuple((k.fact, k.path) for k in KEYS if k.fact is not None and k.fact not in FACTORS)


def _range_problem(path: str, value, expected: str, note: str) -> dict:
    shown = repr(value)
    return {"key": path, "expected": expected, "actual": "float" if isinstance(value, float) else "int",
            "value": shown if len(shown) <= 60 else shown[:40] + f"... ({len(shown)} digits)", "note": note}


def pipeline_plan(spec: Spec, res: Resolution) -> dict:
    from meshlint.mesh import pipeline

    v = spec.values
    return pipeline.kempnerforge(res.degrees.get("pp"), v.get("model.n_layers"), v.get("pp_schedule"),
                                 v.get("train.grad_accum_steps"), v.get("train.batch_size"))


def bytes_per_param(spec: Spec) -> int | None:
    """Weights, gradients and both AdamW moments live in the parameter dtype (bf16 unless fp32)."""
    precision = spec.values.get("train.mixed_precision")
    return None if precision is None else (16 if precision == "fp32" else 8)


def _present(data: dict, path: str) -> bool:
    section, _, key = path.partition(".")
    table = data.get(section)
    return isinstance(table, dict) and key in table


def _gt0(v) -> bool | None:
    return None if v is None else v > 0


# ----------------------------------------------------------------------------- VLM, eval and launch-line facts

# residual_stream_image_tokens(n): n for these archs, 0 for cross_attention (config/vlm.py:138-157, 241-250,
# 331-335, 463-467 @ 5666d0d)
PREPENDING_ARCHS = ("joint_decoder", "mot", "moma")
POOLING_ADAPTERS = ("avgpool", "attentional_pool")  # model/adapter.py:46
DIVISIBLE_ONLY_POOLS = ("attentional_pool",)         # model/adapter.py:51
RANDOM_ENCODER_TOKENS = 16                           # model/vision.py:100: the "random" stub's num_tokens default
_VLM_FACTS = ("max_text_len", "has_vision_encoder", "encoder_type", "num_tokens", "num_tokens_from", "adapter_type",
              "pool_window", "tokens_per_frame", "frames", "visual_tokens", "residual_image_tokens",
              "required_seq_len", "pool_error")


def _vlm_facts(data: dict, v: dict) -> None:
    """The VLM sequence budget as KempnerForge computes it (config/job.py:99-119 at load, :202-226 in validate,
    distributed/parallel.py:441-447 and model/vlm.py:447-467 when the model is built):
    ``frames × adapter.output_num_tokens(num_tokens)`` image tokens (0 for cross_attention) + ``vlm.max_text_len``.
    ``num_tokens_from``: "config" (vision_encoder.num_tokens > 0: checked at load and in validate), "build" (0 with
    the "random" encoder: its default of 16, checked when the model is built), None (0 with a Hugging Face encoder:
    probed from the checkpoint at build time, so unknown here)."""
    vlm, enc, adapter, video = (data.get(name) for name in ("vlm", "vision_encoder", "adapter", "video"))
    v["video.present"] = isinstance(video, dict)
    v["video.max_frames"] = _int(video, "video.max_frames", 16) if isinstance(video, dict) else None
    for name in _VLM_FACTS:
        v[f"vlm.{name}"] = None
    if not isinstance(vlm, dict):
        return
    v["vlm.max_text_len"] = _int(vlm, "vlm.max_text_len", 512)
    v["vlm.has_vision_encoder"] = isinstance(enc, dict)
    if not isinstance(enc, dict):
        return  # KempnerForge refuses the config first (job.py:66-70)
    adapter = adapter if isinstance(adapter, dict) else {}  # [vlm] materialises the default adapter (job.py:71-74)
    kind, tokens = _str(enc, "type", "random"), _int(enc, "vision_encoder.num_tokens", 0)
    atype, window = _str(adapter, "type", "mlp_2layer"), _int(adapter, "adapter.pool_window", 2)
    v.update({"vlm.encoder_type": kind, "vlm.adapter_type": atype, "vlm.pool_window": window})
    if tokens is None or kind is None:
        return
    if tokens > 0:
        v["vlm.num_tokens"], v["vlm.num_tokens_from"] = tokens, "config"
    elif tokens == 0 and kind == "random":
        v["vlm.num_tokens"], v["vlm.num_tokens_from"] = RANDOM_ENCODER_TOKENS, "build"
    else:
        return
    tokens = v["vlm.num_tokens"]
    if atype is None:
        return
    if atype in POOLING_ADAPTERS:
        if window is None or window <= 0:
            return  # AdapterConfig refuses it at load
        grid = math.isqrt(tokens)
        if grid * grid != tokens:  # model/adapter.py:91-98
            v["vlm.pool_error"] = (f"ValueError: pooling requires a square patch grid, but num_tokens={tokens} is "
                                   "not a perfect square")
            return
        if atype in DIVISIBLE_ONLY_POOLS and grid % window:  # model/adapter.py:80-86
            v["vlm.pool_error"] = (f"ValueError: this pooling connector requires the patch grid ({grid}x{grid}) be "
                                   f"divisible by the pool window ({window})")
            return
        v["vlm.tokens_per_frame"] = (-(-grid // window)) ** 2  # ceil(grid / window) ** 2
    else:
        v["vlm.tokens_per_frame"] = tokens  # projection adapters keep the count
    frames = v["video.max_frames"] if v["video.present"] else 1
    arch = v.get("vlm.arch")
    if frames is None or arch not in PREPENDING_ARCHS + ("cross_attention",):
        return
    v["vlm.frames"] = frames
    v["vlm.visual_tokens"] = frames * v["vlm.tokens_per_frame"]
    v["vlm.residual_image_tokens"] = 0 if arch == "cross_attention" else v["vlm.visual_tokens"]
    if v["vlm.max_text_len"] is not None:
        v["vlm.required_seq_len"] = v["vlm.residual_image_tokens"] + v["vlm.max_text_len"]


def _eval_facts(table, v: dict) -> None:
    """``eval.enabled`` and whether a data source is set, as ``JobConfig.validate`` tests them (job.py:153-157)."""
    table = table if isinstance(table, dict) else {}
    raw = table.get("enabled", False)
    v["eval.enabled"] = raw if isinstance(raw, bool) else coerce(Key("eval.enabled", "bool"), raw)[0]
    v["eval.dataset_path"] = table.get("dataset_path", "")
    v["eval.hf_dataset_name"] = table.get("hf_dataset_name")
    v["eval.has_data_source"] = bool(v["eval.dataset_path"]) or bool(v["eval.hf_dataset_name"])


def _int(table, path: str, default):
    """An int field as KempnerForge's loader coerces it (None: it cannot, or the value is absurd)."""
    if not isinstance(table, dict) or path.rsplit(".", 1)[-1] not in table:
        return default
    raw = table[path.rsplit(".", 1)[-1]]
    value = raw if isinstance(raw, int) and not isinstance(raw, bool) else coerce(Key(path, "int"), raw)[0]
    return value if isinstance(value, int) and abs(value) <= MAX_TOML_INT else None


def _number(table, key: str, default: float):
    """A float field (None: not a finite number; its type problem is the schema check's)."""
    if not isinstance(table, dict) or key not in table:
        return default
    raw = table[key]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return None
    return float(raw)


def _str(table: dict, key: str, default: str):
    raw = table.get(key, default)
    return raw if isinstance(raw, str) else None


# A KempnerForge override on a launch line: ``--section.key=value``. The parser (config/loader.py:250-285)
# treats an option without ``=`` as a boolean flag (value "true") and skips any argument not starting with
# ``--``: ``--distributed.tp 4`` passes tp = "true" and drops the 4.
SECTIONS = ("model", "train", "optimizer", "scheduler", "data", "eval", "distributed", "checkpoint", "metrics",
            "profiling", "vision_encoder", "adapter", "vlm", "video")  # JobConfig's fields (config/job.py:42-55)
_SPACE_FORM = fastre.compile(r"(?<![\w=.-])--([A-Za-z_]\w*(?:\.[A-Za-z_][\w-]*)+)[ \t]+(?![-\\])(\S+)")
_COMMAND_WORDS = ("train.py", "torchrun", "srun ", "sbatch ", "python ", "uv run", ".sh ", "--nproc")
_VALUE_LIKE = fastre.compile(r"""^(?:[-+]?\.?[0-9][\w.+-]*|true|false|True|False|yes|no"""
                         r"""|"[^"]*"|'[^']*'|\[.*|<.*>|\S*/\S*)$""")
def _fits(typ: dict | None, word: str) -> bool:
    """Whether ``word`` reads as a value of the key's type (outside a command line, only such words count)."""
    kind = (typ or {}).get("kind")
    if kind == "optional":
        return _fits(typ.get("of"), word)
    if kind in ("enum", "literal"):
        return word in typ.get("values", ())
    if kind == "bool":
        return word in ("true", "false", "True", "False", "1", "0", "yes", "no")
    if kind in ("int", "float"):
        return bool(fastre.compile(r"^[-+]?\.?[0-9][0-9_.eE+-]*$").match(word))
    if kind == "str":
        return bool(fastre.compile(r"""^(?:\S*[/<>"'.]\S*)$""").match(word))
    return bool(_VALUE_LIKE.match(word))


_EQUALS_FORM = fastre.compile(r"--[A-Za-z_]\w*\.[\w.-]+=")
_EQUALS_OVERRIDE = fastre.compile(r"(?<![\w=.-])--([A-Za-z_]\w*(?:\.[A-Za-z_][\w-]*)+)=(\S*)")


def equals_overrides(comments: list) -> list:
    """Overrides written ``--section.key=value`` in the file's comments (its launch lines, or prose naming one):
    ``{line, key, value}``. meshlint does not apply them to the config (which launch runs is the user's choice);
    a rule about a key the documented launch supplies can see that it does."""
    found = []
    for line, _col, text in comments:
        if "--" not in text:
            continue
        for match in _EQUALS_OVERRIDE.finditer(text):
            key = match.group(1)
            if key.split(".", 1)[0] in SECTIONS:
                found.append({"line": line, "key": key, "value": match.group(2)})
    return found


_TRUE_WORDS = ("true", "True", "1", "yes")


def space_overrides(comments: list, data: dict | None = None) -> list:
    """Overrides written ``--section.key value`` in the file's comments (its launch lines), each with what
    KempnerForge makes of it: ``{line, col, key, value, refused, says, effective}``. ``refused``: KempnerForge
    stops on the "true" it receives (an int, float, enum, Literal or list field, or an unknown key); otherwise
    it runs with ``effective`` instead of the value written. A bool flag followed by a true word is harmless and
    left out; so is prose (``set --distributed.tp to 4``): outside a command line the next word must look
    like a value."""
    found, continued = [], set()
    for line, col, text in comments:
        if "--" not in text:
            if "\\" in text and text.rstrip().endswith("\\"):  # (most comments have no backslash at all)
                continued.add(line + 1)
            continue
        command = (line in continued or text.lstrip().startswith(("--", "...")) or _EQUALS_FORM.search(text)
                   or any(word in text for word in _COMMAND_WORDS))
        if text.rstrip().endswith("\\"):
            continued.add(line + 1)
        for match in _SPACE_FORM.finditer(text):
            key, value = match.group(1), match.group(2)
            if key.split(".", 1)[0] in SECTIONS:
                found.append({"line": line, "col": col + 1 + match.start(), "key": key, "value": value,
                              "command": bool(command)})
    return [item for item in (_judge_space_override(item, data or {}) for item in found) if item is not None]


def _judge_space_override(item: dict, data: dict) -> dict | None:
    """What KempnerForge does with the "true" the flag passes, laid over the file's own section (its overrides
    are applied on top of the TOML: loader.py:321-326): the schema check's new problems, with and without it."""
    from meshlint.frameworks import schema_data

    try:
        schema = schema_data.load("kempnerforge", "5666d0d")
    except schema_data.SchemaError:
        return None  # a build without the generated schema: nothing to judge it by
    entry = schema.key(item["key"])
    command = item.pop("command")
    if not command and not _fits(entry["type"] if entry else None, item["value"]):
        return None  # prose, not an override: "set --distributed.tp to 4"
    parts = item["key"].split(".")
    before = {**data, parts[0]: data[parts[0]] if isinstance(data.get(parts[0]), dict) else {}}
    import copy  # only for a launch line's space override: most checks never get here (~0.6 ms import)

    after = copy.deepcopy(before)
    node = after
    for part in parts[:-1]:
        node = node[part] if isinstance(node.get(part), dict) else node.setdefault(part, {})
        if not isinstance(node, dict):
            return None
    node[parts[-1]] = "true"
    seen = {(p["key"], p["message"]) for p in schema.check(before, origin="cli")}
    problems = [p for p in schema.check(after, origin="cli") if (p["key"], p["message"]) not in seen]
    problem = problems[0] if problems else None
    if problem is not None and problem.get("refused"):
        return {**item, "refused": True, "says": problem["framework"], "effective": None}
    if problem is not None and problem.get("effective") is True:  # a bool field: the flag means true
        if item["value"] in _TRUE_WORDS:
            return None
        return {**item, "refused": False, "says": "KempnerForge reads the flag as true", "effective": "true"}
    return {**item, "refused": False, "says": f'KempnerForge sets {item["key"]} to the string "true"',
            "effective": '"true"'}


def dashless_overrides(comments: list, data: dict | None) -> list:
    """Overrides written ``section.key=value`` without ``--`` on a launch line in the file's comments (after
    ``train.py CONFIG.toml``, or on a line continuing one), each as ``dashless_item`` makes it. Prose is left
    alone: only a comment that runs train.py on a TOML counts."""
    found, command = [], False
    for line, col, text in comments:
        if not command and ("=" not in text or "train.py" not in text):
            continue  # most comments: no launch line starts here (only its words are split below)
        words = _words(text)
        start = None
        if command:
            start = 0
        else:
            script = next((k for k, (_, w) in enumerate(words) if w.endswith("train.py")), None)
            if script is not None:
                start = next((k + 1 for k, (_, w) in enumerate(words) if k > script and w.endswith(".toml")), None)
        command = start is not None and text.rstrip().endswith("\\")
        if start is None:
            continue
        for at, word in words[start:]:
            if word == "#":
                break             # a comment inside the comment (# expect: ..., # a note)
            hit = dashless_override(word)
            if hit is not None:
                found.append(dashless_item(hit[0], hit[1], word, line, col + 1 + at, data))
    return found


def _words(text: str) -> list:
    """(offset, word) of each blank-separated word of ``text``."""
    out, start = [], None
    for k, c in enumerate(text + " "):
        if c in " \t":
            if start is not None:
                out.append((start, text[start:k]))
                start = None
        elif start is None:
            start = k
    return out


def dashless_override(text: str) -> tuple | None:
    """(key, value) of ``section.key=value`` (Hydra's form, with its ``+`` / ``++`` prefixes): an override
    written without ``--``, which KempnerForge's parser skips; None for any other word."""
    key, eq, value = text.partition("=")
    key = key[2:] if key.startswith("++") else key[1:] if key.startswith("+") else key
    parts = key.split(".")
    if not eq or len(parts) < 2:
        return None
    for k, part in enumerate(parts):
        if not part or not (part[0].isalpha() or part[0] == "_") or not part.isascii():
            return None
        if not all(c.isalnum() or c == "_" or (c == "-" and k > 0) for c in part):
            return None
    return key, value


def dashless_item(key: str, value: str, word: str, line: int, col: int, data: dict | None) -> dict:
    """``{line, col, key, value, word, kept}``: ``kept``, the value the run keeps for ``key`` (the config's, else
    KempnerForge's default, as TOML writes it), or null where KempnerForge has no such key."""
    node = data or {}
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    kept = None
    if isinstance(node, dict) and parts[-1] in node:
        kept = _toml_text(node[parts[-1]])
    else:
        from meshlint.frameworks import schema_data

        try:
            entry = schema_data.load("kempnerforge", "5666d0d").key(key)
        except schema_data.SchemaError:
            entry = None
        if entry is not None and "default" in entry:
            kept = _toml_text(entry["default"])
    return {"line": line, "col": col, "key": key, "value": value, "word": word, "kept": kept}


def _toml_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "None"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _load_error(degrees: dict) -> str | None:
    """``DistributedConfig.__post_init__``, in its order."""
    ds = degrees["dp_shard"]
    if ds is not None and (ds == 0 or ds < -1):
        return "ValueError: dp_shard must be -1 (auto) or positive"
    for name in ("dp_replicate", "tp", "pp", "cp", "ep"):
        v = degrees[name]
        if v is not None and v < 1:
            return f"ValueError: {name} must be >= 1"
    return None


def resolve(spec: Spec, world: int | None) -> Resolution:
    d = dict(spec.degrees)
    res = Resolution(degrees=d, world_factors=_factors(d, d["dp_shard"] == -1))
    unread = spec.extra.get("unread_degrees")
    if unread:  # a launch line sets them from values the script does not determine
        res.notes.append(f"{', '.join(unread)} set by the launch line to values meshlint cannot see: the mesh is "
                         "not resolved")
        return res
    if not usable(spec, res, FACTORS):
        return res
    other = d["dp_replicate"] * d["tp"] * d["pp"] * d["cp"] * d["ep"]
    inferred = d["dp_shard"] == -1
    res.valid_worlds = ("multiple", other) if inferred else ("exact", d["dp_shard"] * other)
    world = settle_world(res, world, inferred, other, "dp_shard")
    if world is None:
        return res
    if inferred:
        if world % other:
            d["dp_shard"] = None
            res.world_factors = _factors(d, True)
            res.framework_error = f"ValueError: world_size ({world}) not divisible by dp_replicate*tp*pp*cp*ep ({other})"
            res.error_stage = "resolve"
            return res
        d["dp_shard"] = world // other
        res.notes.append(f"dp_shard = -1 resolves to {world} / {other} = {d['dp_shard']}")
    res.world_factors = _factors(d, inferred)
    expected = prod(d[n] for n in FACTORS)
    if expected != world:
        res.framework_error = (
            "ValueError: Parallelism dimensions ("
            + " × ".join(str(d[n]) for n in FACTORS)
            + f" = {expected}) do not match world_size ({world})"
        )
        res.error_stage = "resolve"
        return res
    if world == 1:
        res.notes.append("world_size 1: init_distributed returns without building a DeviceMesh")
        return res
    mesh = build_mesh(d, world)
    res.meshes["device"] = mesh
    res.primary = "device"
    res.axes = axes_of(mesh)
    dropped = [n for n in ORDER if d[n] == 1 and n not in mesh.dims]
    if dropped:
        res.notes.append(f"size-1 dims dropped from the mesh: {', '.join(dropped)}")
    if d["dp_shard"] == 1 and "dp_shard" in mesh.dims and mesh.dims != ("dp_shard",):
        why = "tp" if d["ep"] == 1 else "ep"
        res.notes.append(f"dp_shard of size 1 inserted before {why} (FSDP2 needs a dp_shard dim when tp or ep > 1)")
    if d["cp"] > 1:
        if mesh.dims == ("dp_shard",) and d["dp_shard"] == 1:
            res.notes.append(
                f"cp = {d['cp']} is not a mesh dim and every other degree is 1, so the mesh falls back to a flat "
                f"dp_shard of all {world} ranks: the cp ranks become FSDP ranks"
            )
        else:
            res.notes.append(f"cp = {d['cp']} is not a mesh dim: the mesh covers {mesh.size} of {world} ranks")
            res.outside = (mesh.size, world - 1)
    elif mesh.dims == ("dp_shard",) and d["dp_shard"] != world:
        res.notes.append(f"flat fallback: ('dp_shard',) of the whole world ({world})")
    res.submeshes = _submeshes(mesh)
    return res


def _factors(d: dict, inferred: bool) -> list:
    return [(n, d[n], inferred and n == "dp_shard") for n in FACTORS]


def build_mesh(d: dict, world: int) -> Mesh:
    dims = [n for n in ORDER if d[n] > 1]
    sizes = [d[n] for n in dims]
    if (d["tp"] > 1 or d["ep"] > 1) and "dp_shard" not in dims:
        at = dims.index("ep") if "ep" in dims else dims.index("tp")
        dims.insert(at, "dp_shard")
        sizes.insert(at, 1)
    if not dims:
        dims, sizes = ["dp_shard"], [world]
    return Mesh("device", tuple(dims), tuple(sizes))


def _submeshes(mesh: Mesh) -> list:
    dims = mesh.dims
    dp = [n for n in ("dp_replicate", "dp_shard") if n in dims]
    dp_sizes = " × ".join(str(mesh.sizes[dims.index(n)]) for n in dp)
    out = [("get_dp_mesh(mesh)", f"mesh[{', '.join(repr(n) for n in dp)}] ({dp_sizes})" + (" HSDP" if len(dp) == 2 else "")
            if dp else "None")]
    for getter, dim in (("get_tp_mesh(mesh)", "tp"), ("get_pp_mesh(mesh)", "pp"), ('mesh["ep"]', "ep")):
        out.append((getter, f"mesh[{dim!r}] ({mesh.sizes[dims.index(dim)]})" if dim in dims else "None"))
    return out
