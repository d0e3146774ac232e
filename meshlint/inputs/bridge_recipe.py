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
}
# the model's sizes: what a provider class or a Hugging Face config.json may give
SIZES = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "kv_channels",
         "num_moe_experts", "moe_ffn_hidden_size", "moe_router_topk", "seq_length")
# Hugging Face config.json keys -> provider fields (what the model bridges' provider_bridge maps)
HF_KEYS = {"num_hidden_layers": "num_layers", "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
           "num_key_value_heads": "num_query_groups", "intermediate_size": "ffn_hidden_size", "head_dim": "kv_channels",
           "num_experts": "num_moe_experts", "n_routed_experts": "num_moe_experts",
           "num_local_experts": "num_moe_experts", "moe_intermediate_size": "moe_ffn_hidden_size",
           "num_experts_per_tok": "moe_router_topk"}
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
            if isinstance(func, ast.Attribute) and func.attr == "to_megatron_provider":
                owner = self.eval(func.value, fr)
                if isinstance(owner, P.Obj) and owner.kind == "hf_bridge":
                    obj = P.Obj("AutoBridge.from_hf_pretrained().to_megatron_provider()", kind="hf_provider")
                    obj.module = owner.module
                    return obj
            return super().call(node, fr)

        def havoc(self, stmts, fr, why, loop_jumps: bool = False) -> None:
            # a branch not followed poisons what its calls are handed; hasattr(config, ...) and its kin only
            # look (Bridge's helpers test the installed Megatron-Core's fields this way: utils/cuda_graph.py)
            super().havoc([_without_pure_calls(s) for s in stmts], fr, why, loop_jumps)

    return BridgeInterp


_PURE = frozenset({"hasattr", "isinstance", "issubclass", "getattr", "callable", "len", "type", "id", "repr",
                   "str", "bool", "int", "float"})


class _Pure(ast.NodeTransformer):
    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in _PURE:
            return ast.copy_location(ast.Constant(value=None), node)
        return self.generic_visit(node)


def _without_pure_calls(stmt):
    """``stmt`` with its calls of builtins that change nothing replaced (a copy: the tree is shared)."""
    import copy

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


def values_of(container, start_dir: str, def_pos: tuple) -> tuple:
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
                provided.update(got)
                origin = f"{ref}'s config.json ({how})"
        else:
            provided["num_layers"] = flags.Unknown(f"the model id of AutoBridge.from_hf_pretrained is not known "
                                                   f"({getattr(ref, 'reason', ref)})")
    elif isinstance(model, P.Obj):
        cls = model.ref.node.name if isinstance(model.ref, P.ClassRef) else (model.cls or "").rsplit(".", 1)[-1]
        entry = providers().get(cls)
        if entry is not None:
            provided.update(entry["fields"])
            origin = f"{cls} ({entry['file']}:{entry['line']}, Megatron-Bridge {TAG})"
        elif model.rest is None:
            notes.append(f"model provider {cls or model.cls!r} is not in the provider table of Megatron-Bridge {TAG}: "
                         "its sizes are not known")
    if origin:
        notes.append(f"model sizes from {origin}")
    for (section, field), dest in FIELDS.items():
        sec = model if section == "model" else container.fields.get(section)
        sec_pos = model_pos if section == "model" else container.pos.get(section) or def_pos
        if isinstance(sec, P.Obj) and field in sec.fields:
            value, pos = sec.fields[field], sec.pos.get(field) or sec_pos
        elif isinstance(sec, P.Obj) and sec.rest is not None:
            value, pos = sec.rest, sec_pos
        elif isinstance(sec, P.U):
            value, pos = sec, sec_pos
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
    # no validate_args: Bridge builds ModelParallelConfig directly, so the Megatron-LM-only check that
    # interleaving without p2p overlap needs pp > 2 (arguments.py:579) does not apply
    out["overlap_p2p_comm"] = True
    out["bridge_recipe"] = True
    return out


# ----------------------------------------------------------------------------- recipes as config sources

def _launch_class():
    from meshlint.frameworks.megatron.launch import MegatronLaunch

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
    from meshlint.frameworks.megatron.launch import MegatronSource

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
        values, where, notes = values_of(value, start, def_pos)
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
