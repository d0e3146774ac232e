"""Megatron-Bridge recipe functions read statically (``ast``, never imported) into Megatron-LM's option dests.

A recipe (``def llama3_70b_pretrain_config() -> ConfigContainer``) is evaluated by pyregistry's abstract interpreter
(helpers and base recipes of the same checkout followed, keyword defaults bound, what cannot be followed an
Unknown). Its ``ConfigContainer`` - the model provider's parallelism and size fields, ``train``'s batch sizes,
``dist`` - then becomes the option values core_0_16.read takes from a Megatron-LM launch (``FIELDS``), so a recipe
is resolved with the same Megatron-Core 0.16.1 rules: the rank generator, the layer split over pp and virtual pp
(get_num_layers_to_build), the batch arithmetic. A size the recipe does not set comes from the provider class
(frameworks/megatron/bridge_providers_v0_3_1.json, generated) or, for ``AutoBridge.from_hf_pretrained(ID)``, from ID's config.json in
a local model directory or the local Hugging Face cache (never downloaded: otherwise unknown, and said so).
User overrides (``model.tensor_model_parallel_size=4``, as scripts/training/run_recipe.py takes them) apply last.
Pinned: Megatron-Bridge v0.3.1 (9c9dd8489), whose 3rdparty/Megatron-LM is core_v0.16.1 (55ac70825).
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re

from meshlint.errors import InputError

from meshlint.frameworks.registry import INPUT_FORMS

FORM = next(f for f in INPUT_FORMS if f.name == "bridge")
TAG = "v0.3.1"
COMMIT = FORM.commit
# (section, field) of a ConfigContainer -> the Megatron-LM dest core_0_16.read takes it as
FIELDS = {
    ("model", "tensor_model_parallel_size"): "tensor_model_parallel_size",
    ("model", "pipeline_model_parallel_size"): "pipeline_model_parallel_size",
    ("model", "virtual_pipeline_model_parallel_size"): "num_virtual_stages_per_pipeline_rank",
    ("model", "context_parallel_size"): "context_parallel_size",
    ("model", "expert_model_parallel_size"): "expert_model_parallel_size",
    ("model", "expert_tensor_parallel_size"): "expert_tensor_parallel_size",
    ("model", "sequence_parallel"): "sequence_parallel",
    ("model", "pipeline_model_parallel_layout"): "pipeline_model_parallel_layout",
    ("model", "num_layers_in_first_pipeline_stage"): "decoder_first_pipeline_num_layers",
    ("model", "num_layers_in_last_pipeline_stage"): "decoder_last_pipeline_num_layers",
    ("model", "account_for_embedding_in_pipeline_split"): "account_for_embedding_in_pipeline_split",
    ("model", "account_for_loss_in_pipeline_split"): "account_for_loss_in_pipeline_split",
    ("model", "num_layers"): "num_layers",
    ("model", "hidden_size"): "hidden_size",
    ("model", "num_attention_heads"): "num_attention_heads",
    ("model", "num_query_groups"): "num_query_groups",
    ("model", "ffn_hidden_size"): "ffn_hidden_size",
    ("model", "kv_channels"): "kv_channels",
    ("model", "num_moe_experts"): "num_experts",
    ("model", "moe_ffn_hidden_size"): "moe_ffn_hidden_size",
    ("model", "moe_router_topk"): "moe_router_topk",
    ("model", "seq_length"): "seq_length",
    ("model", "pipeline_dtype"): "pipeline_dtype",
    ("train", "micro_batch_size"): "micro_batch_size",
    ("train", "global_batch_size"): "global_batch_size",
    ("train", "rampup_batch_size"): "rampup_batch_size",
    ("train", "train_iters"): "train_iters",
    ("dist", "use_tp_pp_dp_mapping"): "use_tp_pp_dp_mapping",
    ("ddp", "num_distributed_optimizer_instances"): "num_distributed_optimizer_instances",
}
# what the whole-peak memory estimate reads (meshlint/mesh/memory_megatron.py), held under "bridge.SECTION.FIELD"
# until megatron_args turns them into Megatron-LM's dests (the mixed-precision config overriding, as Bridge does)
MEMORY_FIELDS = (
    ("model", "recompute_granularity"), ("model", "recompute_method"), ("model", "recompute_num_layers"),
    ("model", "recompute_modules"), ("model", "distribute_saved_activations"), ("model", "gated_linear_unit"),
    ("model", "normalization"), ("model", "share_embeddings_and_output_weights"), ("model", "add_qkv_bias"),
    ("model", "add_bias_linear"), ("model", "vocab_size"), ("model", "make_vocab_size_divisible_by"),
    ("model", "should_pad_vocab"), ("model", "position_embedding_type"), ("model", "mtp_num_layers"),
    ("model", "moe_shared_expert_intermediate_size"), ("model", "moe_layer_freq"), ("model", "hidden_dropout"),
    ("model", "attention_dropout"), ("model", "attention_backend"), ("model", "bf16"), ("model", "fp16"),
    ("model", "q_lora_rank"), ("model", "kv_lora_rank"), ("model", "qk_head_dim"), ("model", "qk_pos_emb_head_dim"),
    ("model", "v_head_dim"), ("model", "qk_layernorm"), ("model", "transformer_impl"),
    ("optimizer", "optimizer"), ("optimizer", "use_distributed_optimizer"),
    ("optimizer", "use_precision_aware_optimizer"), ("optimizer", "main_grads_dtype"),
    ("optimizer", "main_params_dtype"), ("optimizer", "exp_avg_dtype"), ("optimizer", "exp_avg_sq_dtype"),
    ("optimizer", "sgd_momentum"), ("ddp", "use_distributed_optimizer"), ("ddp", "grad_reduce_in_fp32"),
    ("ddp", "use_megatron_fsdp"), ("ddp", "use_custom_fsdp"),
    ("mixed_precision", "bf16"), ("mixed_precision", "fp16"), ("mixed_precision", "grad_reduce_in_fp32"),
)
FIELDS.update({key: "bridge." + ".".join(key) for key in MEMORY_FIELDS})
# ModelParallelConfig / TransformerConfig / GPTModelProvider / DistributedInitConfig defaults a recipe leaves
# (megatron/core/model_parallel_config.py, transformer_config.py at core_v0.16.1; bridge/training/config.py)
DEFAULTS = {
    ("model", "tensor_model_parallel_size"): 1, ("model", "pipeline_model_parallel_size"): 1,
    ("model", "virtual_pipeline_model_parallel_size"): None, ("model", "context_parallel_size"): 1,
    ("model", "expert_model_parallel_size"): 1, ("model", "expert_tensor_parallel_size"): None,
    ("model", "sequence_parallel"): False, ("model", "pipeline_model_parallel_layout"): None,
    ("model", "num_layers_in_first_pipeline_stage"): None, ("model", "num_layers_in_last_pipeline_stage"): None,
    ("model", "account_for_embedding_in_pipeline_split"): False,
    ("model", "account_for_loss_in_pipeline_split"): False,
    ("dist", "use_tp_pp_dp_mapping"): False, ("ddp", "num_distributed_optimizer_instances"): 1,
    ("train", "rampup_batch_size"): None,
    # the memory fields' defaults at v0.3.1 where neither the recipe nor the provider class sets them:
    # megatron/core/transformer/transformer_config.py (core_v0.16.1)
    ("model", "recompute_granularity"): None,            # :383
    ("model", "recompute_method"): None,                 # :394
    ("model", "recompute_num_layers"): None,             # :402
    ("model", "distribute_saved_activations"): False,    # :408
    ("model", "recompute_modules"): None,                # :411 (__post_init__: ["core_attn"])
    ("model", "gated_linear_unit"): False,               # :170
    ("model", "add_qkv_bias"): False,                    # :167
    ("model", "add_bias_linear"): True,                  # :161
    ("model", "hidden_dropout"): 0.1,                    # :137
    ("model", "attention_dropout"): 0.1,                 # :140
    ("model", "attention_backend"): "AttnBackend.auto",  # :110
    ("model", "mtp_num_layers"): None,                   # :48
    ("model", "moe_shared_expert_intermediate_size"): None,   # :534
    ("model", "moe_layer_freq"): 1,                      # :556
    ("model", "qk_layernorm"): False,                    # :208
    ("model", "transformer_impl"): "transformer_engine",  # :880
    # MLATransformerConfig's (:2016-2028): read only where the provider derives from it (multi_latent_attention)
    ("model", "q_lora_rank"): 512, ("model", "kv_lora_rank"): 512, ("model", "qk_head_dim"): 128,
    ("model", "qk_pos_emb_head_dim"): 64, ("model", "v_head_dim"): 128,
    # megatron/core/model_parallel_config.py:106, :109
    ("model", "fp16"): False, ("model", "bf16"): False,
    # Megatron-Bridge src/megatron/bridge/models/gpt_provider.py (v0.3.1)
    ("model", "share_embeddings_and_output_weights"): True,   # :135
    ("model", "make_vocab_size_divisible_by"): 128,      # :136
    ("model", "position_embedding_type"): "learned_absolute",  # :137
    ("model", "vocab_size"): None,                       # :161 (the tokenizer's at run time)
    ("model", "should_pad_vocab"): False,                # :164
    ("model", "normalization"): "LayerNorm",             # :171
    # megatron/core/optimizer/optimizer_config.py (Bridge's OptimizerConfig only defers __post_init__)
    ("optimizer", "use_precision_aware_optimizer"): False,    # :187
    ("optimizer", "main_grads_dtype"): "torch.float32",  # :197
    ("optimizer", "main_params_dtype"): "torch.float32",  # :200
    ("optimizer", "exp_avg_dtype"): "torch.float32",     # :203
    ("optimizer", "exp_avg_sq_dtype"): "torch.float32",  # :206
    ("optimizer", "optimizer"): "adam",                  # :209
    ("optimizer", "sgd_momentum"): 0.9,                  # :255
    ("optimizer", "use_distributed_optimizer"): False,   # :287
    # megatron/core/distributed/distributed_data_parallel_config.py
    ("ddp", "grad_reduce_in_fp32"): False,               # :11
    ("ddp", "use_distributed_optimizer"): False,         # :25
    ("ddp", "use_megatron_fsdp"): False,                 # :69
    ("ddp", "use_custom_fsdp"): False,                   # :72 (deprecated spelling)
    # a MixedPrecisionConfig's own (src/megatron/bridge/training/mixed_precision.py:36-42, v0.3.1): all its fields
    # overwrite the model's, optimizer's and DDP's of the same name (update_config_with_precision_overrides)
    ("mixed_precision", "fp16"): False, ("mixed_precision", "bf16"): False,
    ("mixed_precision", "grad_reduce_in_fp32"): True,
}
# the fields only MLATransformerConfig has (a GPT provider has no such attribute)
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")
# the model's sizes: what a provider class or a Hugging Face config.json may give
SIZES = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "kv_channels",
         "num_moe_experts", "moe_ffn_hidden_size", "moe_router_topk", "seq_length")
# Hugging Face config.json keys -> provider fields (what the model bridges' provider_bridge maps)
HF_KEYS = {"num_hidden_layers": "num_layers", "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
           "num_key_value_heads": "num_query_groups", "intermediate_size": "ffn_hidden_size", "head_dim": "kv_channels",
           "num_experts": "num_moe_experts", "n_routed_experts": "num_moe_experts",
           "num_local_experts": "num_moe_experts", "moe_intermediate_size": "moe_ffn_hidden_size",
           "num_experts_per_tok": "moe_router_topk", "vocab_size": "vocab_size"}
# what hf_sizes must find for a Hugging Face model's peak memory to be estimated
HF_ARCHITECTURE = ("gated_linear_unit", "normalization", "share_embeddings_and_output_weights", "add_bias_linear")
_TABLE: dict = {}
_RECIPE_MARK = re.compile(rb"\bmegatron\.bridge\b")


def providers() -> dict:
    """The generated provider table (bridge_providers_v0_3_1.json): class name -> fields."""
    if not _TABLE:
        path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "frameworks", "megatron",
                            "bridge_providers_v0_3_1.json")
        with open(path, encoding="utf-8") as f:
            _TABLE.update(json.load(f))
    return _TABLE["classes"]


def is_recipe_text(raw: bytes) -> bool:
    """A Python file that builds Megatron-Bridge configs (imports megatron.bridge, names ConfigContainer)."""
    return bool(_RECIPE_MARK.search(raw)) and b"ConfigContainer" in raw


def checkout_root(path: str) -> str | None:
    """The directory holding ``megatron/bridge`` for a file inside a Bridge checkout (its src/), else None."""
    apath = os.path.abspath(path).replace(os.sep, "/")
    marker = "/megatron/bridge/"
    if marker in apath:
        return apath[: apath.index(marker)] or "/"
    return None


def search_path() -> list:
    """More roots to import Bridge from: $MEGATRON_BRIDGE_ROOT (a checkout, or its src/)."""
    root = os.environ.get("MEGATRON_BRIDGE_ROOT")
    if not root:
        return []
    src = os.path.join(root, "src")
    return [src if os.path.isdir(os.path.join(src, "megatron", "bridge")) else root]


# ----------------------------------------------------------------------------- evaluation

def _interp_class():
    """pyregistry's interpreter with one call it cannot follow made readable: the HF-built provider."""
    from meshlint.inputs import pyregistry as P

    class BridgeInterp(P.Interp):
        def call(self, node, fr):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "from_hf_pretrained":
                owner = self.eval(func.value, fr)
                if isinstance(owner, P.Sym) and owner.parts[-1] == "AutoBridge":
                    ref = self.eval(node.args[0], fr) if node.args else \
                        self.eval(node.keywords[0].value, fr) if node.keywords else None
                    ref = self.force(ref, node, fr)
                    obj = P.Obj("AutoBridge.from_hf_pretrained()", kind="hf_bridge")
                    obj.module = ref if isinstance(ref, (str, P.U)) else \
                        self.unknown("the model id is not a string", node, fr.mod)
                    return obj
            # get_model_config(): a builder-backed config converted from the same config.json (later Bridge:
            # models/conversion/auto_bridge.py get_model_config), sized like to_megatron_provider()
            if isinstance(func, ast.Attribute) and func.attr in ("to_megatron_provider", "get_model_config"):
                owner = self.eval(func.value, fr)
                if isinstance(owner, P.Obj) and owner.kind == "hf_bridge":
                    obj = P.Obj("AutoBridge.from_hf_pretrained().to_megatron_provider()", kind="hf_provider")
                    obj.module = owner.module
                    return obj
            return super().call(node, fr)

        def poison_param(self, fref, param, value, why):
            # a helper that stopped at a branch it cannot decide changed only the fields its code may write
            from meshlint.inputs.bridge_writes import written_fields

            def resolve(name):
                binding = fref.mod.binding(name)
                return binding[1] if binding is not None and binding[0] == "def" and \
                    isinstance(binding[1], ast.FunctionDef) else None

            fields = written_fields(fref.node, param, resolve) if isinstance(value, P.Obj) and \
                isinstance(fref.node, ast.FunctionDef) else None
            if fields is None:
                return super().poison_param(fref, param, value, why)
            for attr in fields:
                if not isinstance(value.fields.get(attr), P.U):
                    value.fields[attr] = why
                    value.pos[attr] = (why.line, why.col)

        def get_attr(self, base, attr, node, fr):
            # a provider's field the recipe leaves: the provider class's own default (the generated table), else
            # TransformerConfig's (DEFAULTS) - as values_of reads it
            if isinstance(base, P.Obj) and attr not in base.fields and base.rest is None and base.kind is None:
                cls = _class_name(base, P)
                entry = providers().get(cls)
                if entry is not None and attr in entry["fields"]:
                    return entry["fields"][attr]
                if entry is not None and ("model", attr) in DEFAULTS and (
                        attr not in MLA_FIELDS or "MLATransformerConfig" in _ancestors(cls)):
                    return DEFAULTS[("model", attr)]
            return super().get_attr(base, attr, node, fr)

        def builtin(self, name, args, kwargs, star, node, fr):
            got = _reflect(self, name, args, kwargs, star, node, fr, P) if star is None and not kwargs else None
            return super().builtin(name, args, kwargs, star, node, fr) if got is None else got

        def invoke(self, fref, args, kwargs, star, node, fr):
            fdef = fref.node
            if getattr(fdef, "name", None) == "get_mixed_precision_config" and \
                    fref.mod.dotted == "megatron.bridge.training.mixed_precision" and len(args) == 1 and not kwargs:
                # its table (MIXED_PRECISION_RECIPES) is filled by @register at import: the recipe function
                # of that name, as ConfigContainer's own string form is read
                name = self.force(args[0], node, fr)
                if isinstance(name, str):
                    return _mixed_precision(name, self, node, P)
            # a decorator that hands its function back (mixed_precision.py's @register) does not change it
            if fdef.decorator_list and all(self._identity(d, fref.mod) for d in fdef.decorator_list):
                bare = _BARE.get(id(fdef))
                if bare is None or bare[0] is not fdef:
                    bare = _BARE[id(fdef)] = (fdef, copy.copy(fdef))
                    bare[1].decorator_list = []
                fref = P.FuncRef(fref.mod, bare[1], fref.closure)
            return super().invoke(fref, args, kwargs, star, node, fr)

        def _identity(self, dec, mod) -> bool:
            """``dec`` is a function of the checkout whose every return hands back its one argument, unchanged."""
            if not isinstance(dec, ast.Name):
                return False
            value = self.global_value(mod, dec.id, dec, P.Frame(mod, {}))
            if isinstance(value, P.Sym):
                value = self.resolve(value)
            if not isinstance(value, P.FuncRef) or not isinstance(value.node, ast.FunctionDef):
                return False
            f = value.node
            a = f.args
            if len(a.posonlyargs) + len(a.args) != 1 or a.vararg or a.kwarg or a.kwonlyargs or f.decorator_list:
                return False
            name = (a.posonlyargs + a.args)[0].arg
            nodes = list(ast.walk(ast.Module(body=f.body, type_ignores=[])))
            returns = [n for n in nodes if isinstance(n, ast.Return)]
            return bool(returns) and all(isinstance(r.value, ast.Name) and r.value.id == name for r in returns) \
                and not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
                            or isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                            for n in nodes)

        def havoc(self, stmts, fr, why, loop_jumps: bool = False) -> None:
            # a branch not followed poisons what its calls are handed; hasattr(config, ...) and its kin only
            # look (Bridge's helpers test the installed Megatron-Core's fields this way: utils/cuda_graph.py)
            super().havoc([_without_pure_calls(s) for s in stmts], fr, why, loop_jumps)

    return BridgeInterp


def _class_name(obj, P) -> str:
    """The class an object of the interpreter was built from, as the provider table names it."""
    return obj.ref.node.name if isinstance(obj.ref, P.ClassRef) else (obj.cls or "").rsplit(".", 1)[-1]


_BUILTIN_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "tuple": tuple, "dict": dict}


def _reflect(interp, name, args, kwargs, star, node, fr, P):
    """``getattr(obj, "name"[, default])``, ``hasattr(obj, "name")`` and ``isinstance(value, T)`` where the answer
    is certain from what the interpreter holds; None where it is not (the interpreter's unknown then)."""
    if name in ("getattr", "hasattr") and len(args) in ((2, 3) if name == "getattr" else (2,)):
        obj, attr = (interp.force(a, node, fr) for a in args[:2])
        if not isinstance(obj, P.Obj) or not isinstance(attr, str):
            return None
        if attr in obj.fields:   # set on it: it has it, whatever the class
            return True if name == "hasattr" else obj.fields[attr]
        if name == "hasattr":
            return None
        value = interp.get_attr(obj, attr, node, fr)
        return None if isinstance(value, P.U) else value
    if name == "isinstance" and len(args) == 2:
        value, kind = (interp.force(a, node, fr) for a in args)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        cls = _class_ref(interp, value.ref, P) if isinstance(value, P.Obj) else None
        answers = {_is_instance(value, cls, _class_ref(interp, k, P) or k, P) for k in kinds}
        return True if True in answers else False if answers == {False} else None
    return None


def _class_ref(interp, ref, P):
    """The class statement a class value (or an object's class) refers to, as a ClassRef; None if not one."""
    if isinstance(ref, P.Sym):
        try:
            ref = interp.resolve(ref)
        except Exception:   # noqa: BLE001  a name that does not resolve: not a class of the checkout
            return None
    return ref if isinstance(ref, P.ClassRef) and isinstance(ref.node, ast.ClassDef) else None


def _is_instance(value, cls, kind, P):
    """True/False where certain, None otherwise: a plain value against a builtin type; a config object (of class
    ``cls``, a class statement of the checkout) against its own class (True) or a builtin type (False); a plain
    value against a class of the checkout (False) where that class derives from no builtin."""
    plain = value is None or isinstance(value, (str, int, float, bool, list, tuple, dict))
    if isinstance(kind, P.Builtin) and kind.name in _BUILTIN_TYPES:
        if plain:
            return isinstance(value, _BUILTIN_TYPES[kind.name])
        return False if cls is not None and not _builtin_base(cls.node) else None
    if isinstance(kind, P.ClassRef):
        if cls is not None and cls.node is kind.node:
            return True
        if plain and not _builtin_base(kind.node):
            return False
    return None


def _builtin_base(cls) -> bool:
    """A class statement naming a builtin type (or Enum, whose members may be strings) among its bases."""
    names = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in cls.bases}
    return bool(names & (set(_BUILTIN_TYPES) | {"Enum", "StrEnum", "IntEnum"}))


_BARE: dict = {}   # id(decorated def) -> (the def, its copy without the identity decorators)
_PURE = frozenset({"hasattr", "isinstance", "issubclass", "getattr", "callable", "len", "type", "id", "repr",
                   "str", "bool", "int", "float"})


class _Pure(ast.NodeTransformer):
    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in _PURE:
            return ast.copy_location(ast.Constant(value=None), node)
        return self.generic_visit(node)


def _without_pure_calls(stmt):
    """``stmt`` with its calls of builtins that change nothing replaced (a copy: the tree is shared)."""
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _PURE
               for n in ast.walk(stmt)):
        return stmt
    return _Pure().visit(copy.deepcopy(stmt))


def evaluate(path: str, function: str | None = None, text: str | None = None):
    """[(name, def line, value, interp, module)] of the recipe functions of ``path`` (all public ones, or one)."""
    from meshlint.inputs import pyregistry as P

    if text is None:
        text = P._read_text(path)
    root = checkout_root(path) or P.infer_root(path)
    reader = P.Reader(root, search_path())
    reader.budget = P.BUDGET_BASE + P.BUDGET_PER_BYTE * len(text) * 8
    try:
        tree = P._parse_text(text, path)
    except InputError as exc:   # pyregistry's help speaks of torchtitan
        exc.help = "Python itself cannot parse this file; Megatron-Bridge could not import it either"
        raise
    mod = P.Module(os.path.abspath(path), reader.checkout.rel(path), P._dotted_of(os.path.abspath(path), root)[0],
                   os.path.basename(path) == "__init__.py", text, tree)
    interp_class = _interp_class()
    out = []
    for fdef in tree.body:
        if not isinstance(fdef, ast.FunctionDef):
            continue
        if function is not None and fdef.name != function:
            continue
        if function is None and (fdef.name.startswith("_") or not _returns_container(fdef)):
            continue
        interp = interp_class(reader, mod)
        value = _run(interp, mod, fdef, P)
        out.append((fdef.name, fdef.lineno, value, interp, mod, fdef))
    return out


def _returns_container(fdef) -> bool:
    ann = fdef.returns
    name = ann.attr if isinstance(ann, ast.Attribute) else ann.id if isinstance(ann, ast.Name) else \
        ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) else ""
    return name.rsplit(".", 1)[-1] == "ConfigContainer"


def _run(interp, mod, fdef, P):
    """The value ``fdef()`` returns, its keyword defaults bound (a required argument: unknown); never raises."""
    line, col = mod.pos(fdef)
    a = fdef.args
    positional = list(a.posonlyargs) + list(a.args)
    required = [p.arg for p in positional[: len(positional) - len(a.defaults)]] + \
        [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    given = {name: P.U(f"{fdef.name}() takes {name} as an argument, which a recipe run does not give statically",
                       line, col, mod.path) for name in required}
    try:
        local = interp.bind(P.FuncRef(mod, fdef), [], given, fdef, P.Frame(mod, {}))
    except P._Raise as exc:
        return P.U(f"{fdef.name}() cannot be called with no arguments: {exc.unknown.reason}", line, col, mod.path)
    try:
        try:
            interp.exec_block(fdef.body, P.Frame(mod, local))
            return None
        except P._Return as ret:
            return ret.value
        except P._Uncertain as unc:
            return unc.unknown
    except P._Raise as exc:
        return P.U(f"{fdef.name}() raises when run: {exc.unknown.reason}", exc.unknown.line, exc.unknown.col,
                   exc.unknown.file)
    except P._Limit as exc:
        return P.U(f"{fdef.name}() is not followed: {exc}", line, col, mod.path)
    except Exception as exc:   # never a traceback: an interpreter gap is an Unknown for this recipe
        return P.U(f"{fdef.name}() could not be read statically ({type(exc).__name__}: {exc})", line, col, mod.path)


# ----------------------------------------------------------------------------- values -> Megatron-LM dests

def parse_override(word: str) -> tuple:
    """``model.tensor_model_parallel_size=4`` (run_recipe.py's Hydra-style overrides) -> (section, field, value)."""
    key, eq, raw = word.lstrip("+").partition("=")
    parts = key.split(".")
    if not eq or len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise InputError("ML101", f"override {word!r} is not SECTION.FIELD=VALUE (e.g. model.tensor_model_parallel_size=4)")
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        value = text[1:-1]
    elif text.lower() in ("true", "false"):
        value = text.lower() == "true"
    elif text.lower() in ("null", "none", "~"):
        value = None
    else:
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = text
    return parts[0], ".".join(parts[1:]), value


def hf_sizes(ref: str, start_dir: str) -> tuple:
    """({provider field: value}, how it was found or why not) from a model id's config.json (local only)."""
    from meshlint.inputs.hf_model import MAX_CONFIG_BYTES, find_config
    from meshlint.inputs.source import read_bytes

    path, how = find_config(ref, start_dir)
    if path is None:
        return None, how
    try:
        data = json.loads(read_bytes(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except (InputError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"cannot read {path}: {exc}"
    if isinstance(data, dict) and isinstance(data.get("text_config"), dict):
        data = {**data, **data["text_config"]}   # a vision-language model: its language model's sizes
    out = {}
    for key, field in HF_KEYS.items():
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out.setdefault(field, value)
    if isinstance(data, dict) and "kv_lora_rank" in data:
        # the DeepSeek family's multi-latent attention (models/deepseek/common.py get_common_configs, v0.3.1): its
        # shapes, q_a/kv_a layer norms (deepseek_v3_bridge.py: qk_layernorm), shared experts, first dense layers
        out.update(multi_latent_attention=True, qk_layernorm=True, q_lora_rank=data.get("q_lora_rank"))
        for key, field in (("kv_lora_rank", "kv_lora_rank"), ("qk_nope_head_dim", "qk_head_dim"),
                           ("qk_rope_head_dim", "qk_pos_emb_head_dim"), ("v_head_dim", "v_head_dim")):
            out[field] = data.get(key)
        moe, shared, dense = data.get("moe_intermediate_size"), data.get("n_shared_experts"), \
            data.get("first_k_dense_replace")
        if isinstance(moe, int) and isinstance(shared, int):
            out["moe_shared_expert_intermediate_size"] = moe * shared
        layers = out.get("num_layers")
        if isinstance(dense, int) and isinstance(layers, int) and 0 <= dense <= layers:
            out["moe_layer_freq"] = [0] * dense + [1] * (layers - dense)
    if isinstance(data, dict):   # what the model bridges' provider_bridge derives (models/llama/llama_bridge.py ...)
        if isinstance(data.get("tie_word_embeddings"), bool):
            out["share_embeddings_and_output_weights"] = data["tie_word_embeddings"]
        if isinstance(data.get("hidden_act"), str):   # the gated (gate/up/down) MLP of the SiLU families
            out["gated_linear_unit"] = data["hidden_act"] in ("silu", "swiglu")
            out["add_bias_linear"] = bool(data.get("mlp_bias", False))
        if "rms_norm_eps" in data:
            out["normalization"] = "RMSNorm"
        if isinstance(data.get("attention_bias"), bool):
            out["add_qkv_bias"] = data["attention_bias"]
    return out, how


def _plain(value, P, flags):
    """A value of the interpreter as the parser would hold it (an Unknown where it is not a plain value)."""
    if isinstance(value, flags.Unknown):
        return value
    if isinstance(value, P.U):
        return flags.Unknown(value.reason)
    if isinstance(value, P.Sym):
        return value.orig
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):   # a pipeline layout: [["embedding", "decoder", ...], ...]
        items = [_plain(v, P, flags) for v in value]
        return flags.Unknown(next(i.reason for i in items if isinstance(i, flags.Unknown))) \
            if any(isinstance(i, flags.Unknown) for i in items) else items
    return flags.Unknown("not a plain value (an object or expression the static reader keeps abstract)")


def _mixed_precision(value, interp, node, P):
    """ConfigContainer.mixed_precision as Bridge's finalize makes it (config.py:1860-1862): a recipe name such as
    ``"bf16_mixed"`` is get_mixed_precision_config's, the checkout's registered function of that name, run."""
    if not isinstance(value, str) or interp is None:
        return value
    name = value.replace("-", "_")
    ref = interp.resolve(P.Sym(("megatron", "bridge", "training", "mixed_precision", name), 4, name))
    if not isinstance(ref, P.FuncRef):
        return P.U(f"mixed precision {value!r}: no such recipe function in the checkout's "
                   "megatron/bridge/training/mixed_precision.py", 0, 0, "")
    try:
        return interp.invoke(ref, [], {}, None, node, P.Frame(ref.mod, {}))
    except Exception as exc:   # noqa: BLE001  an interpreter gap: the precision is unknown, never a traceback
        return P.U(f"mixed precision {value!r} could not be read statically ({type(exc).__name__})", 0, 0, "")


def _ancestors(cls: str) -> list:
    """``cls`` and its provider-table bases, nearest first."""
    table, out, todo = providers(), [], [cls]
    while todo:
        name = todo.pop(0)
        if name not in out:
            out.append(name)
            todo += (table.get(name) or {}).get("bases", [])
    return out


def values_of(container, start_dir: str, def_pos: tuple, interp=None, node=None) -> tuple:
    """(values by dest, positions by dest, notes) of a recipe's ConfigContainer, before overrides."""
    from meshlint.frameworks.megatron import flags
    from meshlint.inputs import pyregistry as P

    values, where, notes = {}, {}, []
    if not isinstance(container, P.Obj):
        why = container.reason if isinstance(container, P.U) else f"returns {type(container).__name__}"
        for dest in ("tensor_model_parallel_size", "num_layers"):
            values[dest] = flags.Unknown(why)
            where[dest] = (container.line, container.col) if isinstance(container, P.U) else def_pos
        return values, where, notes
    model = container.fields.get("model")
    model_pos = container.pos.get("model") or def_pos
    provided, origin = {}, None
    if isinstance(model, P.Obj) and model.kind == "hf_provider":
        ref = model.module
        if isinstance(ref, str):
            got, how = hf_sizes(ref, start_dir)
            if got is None:
                provided["num_layers"] = flags.Unknown(f"the model's sizes come from {ref}'s Hugging Face config: {how}")
            else:
                # the architecture a model bridge's provider_bridge takes from the config: unknown where it is not there
                why = flags.Unknown(f"{ref}'s config.json does not say it")
                provided.update({f: why for f in HF_ARCHITECTURE})
                provided.update(got)
                origin = f"{ref}'s config.json ({how})"
                if got.get("multi_latent_attention"):
                    values["multi_latent_attention"], where["multi_latent_attention"] = True, model_pos
        else:
            provided["num_layers"] = flags.Unknown(f"the model id of AutoBridge.from_hf_pretrained is not known "
                                                   f"({getattr(ref, 'reason', ref)})")
    elif isinstance(model, P.Obj):
        cls = model.ref.node.name if isinstance(model.ref, P.ClassRef) else (model.cls or "").rsplit(".", 1)[-1]
        entry = providers().get(cls)
        kinds = {"MLAModelProvider": "multi_latent_attention", "MLATransformerConfig": "multi_latent_attention",
                 "MambaModelProvider": "bridge.mamba",
                 "T5ModelProvider": "bridge.t5"}
        if any(f.startswith(("hybrid_", "mamba_")) for f in model.fields):   # a Mamba hybrid, whatever its class
            values["bridge.mamba"], where["bridge.mamba"] = True, model_pos
        for base in _ancestors(cls):   # what the memory estimate does not model
            if base in kinds:
                values[kinds[base]], where[kinds[base]] = True, model_pos
        if entry is not None:
            provided.update(entry["fields"])
            # a default the generator could not read is not the base class's: unknown
            provided.update({f: flags.Unknown(f"{cls}.{f}'s default is not read statically")
                             for f in entry.get("unreadable", ())})
            origin = f"{cls} ({entry['file']}:{entry['line']}, Megatron-Bridge {TAG})"
        elif model.rest is None:
            notes.append(f"model provider {cls or model.cls!r} is not in the provider table of Megatron-Bridge {TAG}: "
                         "its sizes are not known")
            # nor its own defaults of the fields the memory estimate reads (a hybrid or Mamba provider's among them)
            why = flags.Unknown(f"model provider {cls or model.cls} is not in the provider table of Megatron-Bridge "
                                f"{TAG}: its defaults are not known")
            provided.update({f: why for s, f in MEMORY_FIELDS if s == "model"})
    if origin:
        notes.append(f"model sizes from {origin}")
    if container.fields.get("peft") is not None:   # frozen base weights: no gradients or optimizer state for them
        values["bridge.peft"], where["bridge.peft"] = True, container.pos.get("peft") or def_pos
    mixed = _mixed_precision(container.fields.get("mixed_precision"), interp, node, P)
    for (section, field), dest in FIELDS.items():
        sec = model if section == "model" else mixed if section == "mixed_precision" else \
            container.fields.get(section)
        if section == "mixed_precision" and not isinstance(sec, (P.Obj, P.U)):
            continue   # none: the model's, optimizer's and DDP's own precision fields stand
        sec_pos = model_pos if section == "model" else container.pos.get(section) or def_pos
        if isinstance(sec, P.Obj) and field in sec.fields:
            value, pos = sec.fields[field], sec.pos.get(field) or sec_pos
        elif isinstance(sec, P.Obj) and sec.rest is not None:
            value, pos = sec.rest, sec_pos
        elif isinstance(sec, P.U):
            value, pos = sec, sec_pos
        elif section == "optimizer" and sec is None:   # a required field of ConfigContainer (config.py:1327)
            value, pos = flags.Unknown("the recipe sets no optimizer config"), def_pos
        elif section == "model" and field in provided:
            value, pos = provided[field], sec_pos
        elif (section, field) in DEFAULTS:
            value, pos = DEFAULTS[(section, field)], sec_pos
        else:
            continue
        if isinstance(value, P.U) and value.line > 0:
            pos = (value.line, value.col)   # where the recipe makes it unknown
        values[dest] = _plain(value, P, flags)
        where[dest] = pos if pos and pos[0] > 0 else def_pos
    return values, where, notes


def apply_overrides(values: dict, where: dict, overrides: list, notes: list) -> set:
    """Lay ``(word, line, col)`` overrides over the recipe's values (later words win); the dests they set."""
    fields = {f"{s}.{f}": d for (s, f), d in FIELDS.items()}
    done = set()
    for word, line, col in overrides:
        section, field, value = parse_override(word)
        dest = fields.get(f"{section}.{field}")
        if dest is None:
            notes.append(f"override {section}.{field} is applied by Bridge but not read by meshlint's checks")
            continue
        values[dest] = value
        where[dest] = (line, col)
        done.add(dest)
    return done


_FINALIZE: dict = {}


def finalize_defaults(root: str | None) -> dict:
    """What the checkout's provider ``finalize()`` (models/transformer_config.py) sets before Megatron-Core's
    __post_init__ runs, read from its code (it, and the module's functions it calls by name):
    ``sp_off``: sequence_parallel = False (at tp = 1; Bridge main since e5c7b8c28, 2026-03-20);
    ``etp_one``: expert_tensor_parallel_size = 1 (when unset with ep > 1; later Bridge main).
    Bridge v0.3.1 sets neither: Megatron-Core then refuses sequence parallelism at tp = 1 and etp defaults to tp."""
    path = os.path.join(root, "megatron", "bridge", "models", "transformer_config.py") if root else None
    if path is None or not os.path.isfile(path):
        return {"sp_off": False, "etp_one": False}
    if path not in _FINALIZE:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        bodies = []
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name == "finalize":
                bodies.append(fn)
                bodies += [helpers[c.func.id] for c in ast.walk(fn) if isinstance(c, ast.Call)
                           and isinstance(c.func, ast.Name) and c.func.id in helpers]

        def sets(attr: str, value) -> bool:
            return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is value
                       and any(isinstance(t, ast.Attribute) and t.attr == attr for t in n.targets)
                       for body in bodies for n in ast.walk(body))

        _FINALIZE[path] = {"sp_off": sets("sequence_parallel", False), "etp_one": sets("expert_tensor_parallel_size", 1)}
    return _FINALIZE[path]


def megatron_args(values: dict, finalize: dict | None = None) -> dict:
    """The option values core_0_16.read takes: the dests above, and what Megatron-LM derives from them."""
    out = dict(values)
    finalize = finalize or {}
    # core_0_16.read switches sequence parallelism off at tp = 1 as validate_args does; a Bridge recipe has no
    # validate_args, so the value as set is kept for ML980 (unless the checkout's finalize() switches it off)
    out["bridge_sequence_parallel"] = False if finalize.get("sp_off") else values.get("sequence_parallel")
    ep = values.get("expert_model_parallel_size")
    if finalize.get("etp_one") and values.get("expert_tensor_parallel_size") is None and isinstance(ep, int) and ep > 1:
        out["expert_tensor_parallel_size"] = 1
    groups = out.get("num_query_groups")
    out["group_query_attention"] = groups is not None
    out.update(memory_dests(values))
    # no validate_args: Bridge builds ModelParallelConfig directly, so the Megatron-LM-only check that
    # interleaving without p2p overlap needs pp > 2 (arguments.py:579) does not apply
    out["overlap_p2p_comm"] = True
    out["bridge_recipe"] = True
    return out


_DTYPES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
           "uint8": "fp8", "float8_e4m3fn": "fp8"}


def memory_dests(values: dict) -> dict:
    """Megatron-LM's dests memory_megatron.estimate reads, from the recipe's model, optimizer, DDP and mixed-precision
    fields as Bridge combines them; ``bridge_memory_unknown`` says why not where one of them is not known."""
    from meshlint.frameworks.megatron import flags

    def get(section, field):
        return values.get("bridge." + section + "." + field)

    unknown = [f"{k[len('bridge.'):]}: {v.reason}" for k, v in values.items()
               if k.startswith("bridge.") and isinstance(v, flags.Unknown)]
    out = {}
    if unknown:
        out["bridge_memory_unknown"] = unknown[0]
        return out
    mixed = "bridge.mixed_precision.bf16" in values   # a MixedPrecisionConfig overrides the fields it shares
    pick = lambda section, field: get("mixed_precision", field) if mixed else get(section, field)  # noqa: E731
    bf16, fp16 = bool(pick("model", "bf16")), bool(pick("model", "fp16"))
    reduce_fp32 = bool(pick("ddp", "grad_reduce_in_fp32"))
    out.update(bf16=bf16, fp16=fp16, grad_reduce_in_bf16=bf16 and not reduce_fp32,
               accumulate_allreduce_grads_in_fp32=reduce_fp32,
               # config.py:1888-1900: either config's switch turns on the distributed optimizer for both
               use_distributed_optimizer=bool(get("optimizer", "use_distributed_optimizer")
                                              or get("ddp", "use_distributed_optimizer")),
               use_megatron_fsdp=bool(get("ddp", "use_megatron_fsdp") or get("ddp", "use_custom_fsdp")),
               optimizer=get("optimizer", "optimizer"), sgd_momentum=get("optimizer", "sgd_momentum"),
               use_precision_aware_optimizer=bool(get("optimizer", "use_precision_aware_optimizer")))
    for field in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        dtype = get("optimizer", field)
        out[field] = _DTYPES.get(str(dtype).rsplit(".", 1)[-1], "fp32") if dtype is not None else "fp32"
    for field in ("recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
                  "distribute_saved_activations", "normalization", "add_qkv_bias", "add_bias_linear",
                  "position_embedding_type", "mtp_num_layers", "moe_shared_expert_intermediate_size",
                  "moe_layer_freq", "hidden_dropout", "attention_dropout", "make_vocab_size_divisible_by",
                  "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "qk_layernorm",
                  "transformer_impl"):
        out[field] = get("model", field)
    out["attention_backend"] = str(get("model", "attention_backend") or "")
    out["swiglu"] = bool(get("model", "gated_linear_unit"))
    hidden = values.get("hidden_size")
    if values.get("ffn_hidden_size") is None and isinstance(hidden, int):
        out["ffn_hidden_size"] = 4 * hidden   # TransformerConfig.__post_init__ (not Megatron-LM's swiglu 2/3 rule)
    out["untie_embeddings_and_output_weights"] = get("model", "share_embeddings_and_output_weights") is False
    vocab = get("model", "vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0:
        # gpt_provider.py:244-250: padded (to a multiple of make_vocab_size_divisible_by x tp) only when asked
        tp = values.get("tensor_model_parallel_size")
        multiple = (get("model", "make_vocab_size_divisible_by") or 1) * (tp if isinstance(tp, int) and tp > 0 else 1)
        out["padded_vocab_size"] = -(-vocab // multiple) * multiple if get("model", "should_pad_vocab") else vocab
    else:   # the tokenizer's, at run time
        out["tokenizer_type"] = "bridge"
    return out


# ----------------------------------------------------------------------------- recipes as config sources

def _launch_class():
    from meshlint.inputs.megatron_launch import MegatronLaunch

    class RecipeLaunch(MegatronLaunch):
        """One recipe function as the run it configures (``file.py::function``)."""

        input_form = "bridge"

        @property
        def display(self) -> str:
            return f"{self.file}::{self.entry}"

    return RecipeLaunch


class _Parsed:
    """The parser-shaped record MegatronSource reads: values by dest, where each was set."""

    def __init__(self, values: dict, given: dict, notes: list):
        self.values, self.given, self.notes = values, given, notes
        self.refusals: list = []
        self.unknown_words: list = []
        self.incomplete = True   # Bridge's defaults are not argparse's: what is not read is unknown, not defaulted


def _source_class():
    from meshlint.inputs.megatron_launch import MegatronSource

    class RecipeSource(MegatronSource):
        """A recipe as a config source: values located in the recipe file, or in the launch that overrides them."""

        input_form = "bridge"

        def _from_launch(self, key) -> bool:
            if self.run is None or not isinstance(key, str):
                return False
            first = next((k.strip() for k in key.split("|") if k.strip() in self.parsed.given), key.split("|")[0])
            return first in self.overridden or key == "#world"

        def locate(self, key) -> tuple:
            if self.run is not None and key == "#world":
                return (self.run.line, self.run.entry_col)
            return super().locate(key)

        def file_of(self, key, line=None, col=None):
            from meshlint.inputs.launch_words import COMMAND_LINE

            if self._from_launch(key):
                return self.run.file or COMMAND_LINE
            return self.file

    return RecipeSource


def recipe_sources(path: str, function: str | None = None, overrides=(), text: str | None = None,
                   launch=None) -> list:
    """A source for each recipe function of ``path`` (or the one named), overrides applied.

    ``overrides``: [(word, line, col)]; ``launch``: the run_recipe.py launch they come from (their positions and
    the world's are there; the recipe's own values are located in ``path``)."""
    from meshlint.frameworks.megatron import flags
    from meshlint.inputs.pyregistry import scan_py_comments

    read = evaluate(path, function, text)
    comments = scan_py_comments(read[0][4].text) if read else []   # inline ones too: suppressions
    if function is not None and not read:
        import difflib

        names = [r[0] for r in evaluate(path, None, text)]
        close = difflib.get_close_matches(function, names, n=1)
        raise InputError("ML006", f"{path} has no recipe function {function!r}"
                         + (f"; did you mean {close[0]!r}?" if close else "")
                         + (f" (it has: {', '.join(names[:10])}{' ...' if len(names) > 10 else ''})" if names
                            else " (it has none)"))
    start = os.path.dirname(os.path.abspath(path))
    out = []
    for name, line, value, interp, mod, fdef in read:
        def_pos = mod.pos(fdef)
        values, where, notes = values_of(value, start, def_pos, interp, fdef)
        overridden = apply_overrides(values, where, list(overrides), notes)
        given = {dest: flags.Given(dest, v, dest, where[dest][0], where[dest][1], where[dest][0], where[dest][1])
                 for dest, v in values.items() if dest in where}
        args = megatron_args(values, finalize_defaults(checkout_root(path)))
        rl = _launch_class()(name, [], "recipe", path, def_pos[0], f"{name}()", def_pos[1])
        rl.env = {"known": False}
        rl.notes = [f"Megatron-Bridge recipe {name}() read statically (Megatron-Bridge {TAG}, Megatron-Core 0.16.1)"]
        if launch is not None:
            rl.hints = list(getattr(launch, "hints", []) or [])
        source = _source_class()(rl, _Parsed(args, given, notes), mod.text, comments)
        source.recipe = name
        source.run = launch
        source.overridden = overridden
        out.append(source)
    return out


def adjust(spec, source) -> None:
    """What core_0_16.read says of a launch, said of a recipe: how it was read, and where the sizes came from."""
    spec.framework["decided_by"] = (f"Megatron-Bridge recipe {source.recipe}() read statically (Megatron-Bridge "
                                    f"{TAG}, which pins Megatron-Core 0.16.1)")
    spec.framework["input"] = "bridge"
    origin = next((n[len("model sizes from "):] for n in source.parsed.notes if n.startswith("model sizes from ")), None)
    spec.values["model.source"] = f"Megatron-Bridge: {origin}" if origin else "Megatron-Bridge: the recipe"
    args = spec.extra["args"]
    spec.values["model.known"] = isinstance(args.get("num_layers"), int)
    # an unknown layout, first/last stage or vp leaves the split unknown: core_0_16.read made them None,
    # which would read as "not set" and check an even split the recipe may not ask for
    split = ("pipeline_model_parallel_layout", "decoder_first_pipeline_num_layers",
             "decoder_last_pipeline_num_layers", "num_virtual_stages_per_pipeline_rank",
             "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
    from meshlint.frameworks.megatron import flags

    unknown = [k for k in split if isinstance(source.data.get(k), flags.Unknown)]
    if unknown:
        args["num_layers"] = None
        noted = {u.get("key") for u in spec.unreadable}
        for k in unknown:
            if k not in noted:
                line, col = source.locate(k)
                spec.unreadable.append({"key": k, "reason": source.data[k].reason, "line": line, "col": col})
