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
from meshlint.inputs.bridge_fields import (  # noqa: F401 - also read from here (tests, bench)
    DEFAULTS, FIELDS, HF_ARCHITECTURE, HF_KEYS, MEMORY_FIELDS, MLA_FIELDS, SIZES, finalize_defaults, hf_sizes,
    megatron_args, memory_dests)

FORM = next(f for f in INPUT_FORMS if f.name == "bridge")
TAG = "v0.3.1"
COMMIT = FORM.commit
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
    elif text.startswith("[") and text.endswith("]"):   # a list: model.hierarchical_context_parallel_sizes=[2,4]
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = text
    else:
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = text
    return parts[0], ".".join(parts[1:]), value


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
