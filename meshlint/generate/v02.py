"""Read torchtitan's TOML-era (v0.2.x) model flavors: the ``*ModelArgs`` dicts and the sizes the models derive.

In v0.2.x a model package's ``get_train_spec()`` returns a ``TrainSpec`` naming the
flavor dict (``model_args``), the model class and the pipelining function. A
flavor states only some sizes; the model's ``__init__`` derives the rest (the
SwiGLU width from ``multiple_of`` and ``ffn_dim_multiplier``, which layers are
MoE, the expert width). So each flavor's model is built here the way its
``__init__`` builds it, in the interpreter's module mode: torch's modules
become ``Leaf`` records of their sizes (``nn.Linear(dim, hidden)``), and the
facts are read off the resulting module tree, each citing the source lines it
was computed from. Used by :mod:`meshlint.generate.models`.
"""

from __future__ import annotations

import ast
import os

from meshlint.generate import pyeval as P
from meshlint.generate.model_facts import Facts, _ranges, put_qk_norm, union_all
from meshlint.generate.pyeval import EMPTY, V

_FACTORIES = ("empty", "zeros", "ones", "randn", "rand", "full")


def _ints(vals: list) -> list | None:
    out = []
    for a in vals:
        if isinstance(a.v, (P.Tup, P.Lst)):
            out.extend(x.v for x in a.v.items)
        else:
            out.append(a.v)
    return out if out and all(isinstance(d, int) and not isinstance(d, bool) for d in out) else None


def _torch_modules(name: str, args: list, kwargs: dict, loc) -> V | None:
    """torch.nn's modules as ``Leaf`` records (their parameters, from their signatures' defaults)."""
    tail = name.rsplit(".", 1)[-1]
    if not (name.startswith("torch") or name.startswith("nn.")):
        return None

    def arg(i: int, key: str, default=None) -> V:
        if key in kwargs:
            return kwargs[key]
        if i < len(args):
            return args[i]
        return V(default)

    def known(*vals) -> bool:
        return all(isinstance(v.v, int) and not isinstance(v.v, bool) for v in vals)

    o = P.union(*args, *kwargs.values())
    if tail == "Linear":
        i, out, bias = arg(0, "in_features"), arg(1, "out_features"), arg(2, "bias", True)
        n = i.v * out.v + (out.v if bias.v is not False else 0) if known(i, out) else None
        return V(P.Leaf("nn.Linear", n, {"in_features": i, "out_features": out}), o)
    if tail == "Embedding":
        num, dim = arg(0, "num_embeddings"), arg(1, "embedding_dim")
        return V(P.Leaf("nn.Embedding", num.v * dim.v if known(num, dim) else None,
                        {"num_embeddings": num, "embedding_dim": dim}), o)
    if tail in ("RMSNorm", "LayerNorm"):
        shape = arg(0, "normalized_shape")
        affine = arg(2, "elementwise_affine", True)
        per = 0 if affine.v is False else (2 if tail == "LayerNorm" and arg(3, "bias", True).v is not False else 1)
        return V(P.Leaf(f"nn.{tail}", shape.v * per if known(shape) else None, {"normalized_shape": shape}), o)
    if tail in ("ModuleDict",):
        base = args[0] if args else None
        if base is not None and isinstance(base.v, P.Dct):
            return V(P.Dct(dict(base.v.d), base.v.len_o | base.o))
        return V(P.Dct({}))
    if tail == "ModuleList":
        if args and isinstance(args[0].v, P.Lst):
            return V(P.Lst(list(args[0].v.items), args[0].v.len_o | args[0].o))
        return V(P.Lst([]))
    if tail == "Sequential":
        return V(P.Lst(list(args), o))
    if tail in _FACTORIES:
        dims = _ints(args)
        if dims is None:
            return V(P.Unknown("a tensor of a shape not known statically", loc))
        n = 1
        for d in dims:
            n *= d
        return V(P.Leaf("tensor", n, {}), o)
    if tail == "Parameter":
        if args and isinstance(args[0].v, P.Leaf) and args[0].v.kind == "tensor":
            return V(P.Leaf("nn.Parameter", args[0].v.numel, {}), args[0].o)
        return V(P.Leaf("nn.Parameter", None, {}), o)
    if tail in ("SiLU", "GELU", "Identity", "ReLU", "Dropout", "Tanh"):
        return V(P.Leaf(f"nn.{tail}", 0, {}))
    return None


class V02Reader:
    """Builds each flavor's model of a v0.2.x tree and reads its facts."""

    def __init__(self, root: str, commit: str):
        self.root = os.path.abspath(root)
        self.commit = commit
        self.it = P.Interp(self.root)
        self.it.ext_hook = _torch_modules
        self._dummy = ast.parse("pass").body[0]

    def at(self, rel: str, line: int) -> str:
        return f"{rel}:{line} @ {self.commit}"

    def attr(self, obj: V, name: str) -> V:
        v = obj.v
        if isinstance(v, P.Leaf):
            return v.dims.get(name, V(P.Unknown(f"{v.kind} has no {name}")))
        if not isinstance(v, P.Obj):
            return V(P.Unknown(f"no {name}"))
        if name in v.fields:
            return v.fields[name]
        _, entry = self.it.class_member(v.info, name)
        if entry is None or entry[0] not in ("field", "attr"):
            return V(None)  # a module attribute its __init__ did not set
        try:
            return self.it.getattr(obj, name, self._dummy, P.Frame(v.info.mod, {}, None))
        except P.EvalError as exc:
            return V(P.Unknown(exc.reason, exc.loc))

    def packages(self) -> list:
        out = []
        for base in ("torchtitan/models", "torchtitan/experiments"):
            top = os.path.join(self.root, base)
            for dirpath, dirnames, filenames in sorted(os.walk(top)):
                dirnames.sort()
                dirnames[:] = [d for d in dirnames if d not in ("tests", "__pycache__")]
                if "__init__.py" not in filenames or dirpath == top:
                    continue
                with open(os.path.join(dirpath, "__init__.py"), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                if any(isinstance(n, ast.FunctionDef) and n.name == "get_train_spec" for n in tree.body):
                    out.append(os.path.relpath(dirpath, self.root).replace(os.sep, "."))
        return out

    def read_all(self) -> dict:
        models, unreadable = {}, []
        for modname in self.packages():
            try:
                mod = self.it.module(modname)
                node = next(n for n in mod.tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_train_spec")
                spec = self.it.call(mod.globals["get_train_spec"], [], {}, self._dummy, P.Frame(mod, {}, None))
            except (P.EvalError, RecursionError) as exc:
                unreadable.append({"module": modname, "reason": str(exc)})
                continue
            flavors = self.attr(spec, "model_args")
            model_cls = self.attr(spec, "model_cls")
            if not isinstance(flavors.v, P.Dct) or not isinstance(model_cls.v, P.CRef):
                unreadable.append({"module": modname, "reason": f"{mod.rel}:{node.lineno}: get_train_spec() does not "
                                                                "name a literal flavor dict and model class"})
                continue
            key = modname.split(".", 2)[2] if modname.startswith("torchtitan.models.") else modname.split(".", 2)[2]
            model = {"module": modname, "flavors": {}, "unreadable": [], "key": key}
            pipelining = self._pipelining(spec, mod, node)
            validator = self._spec_fn(spec, mod, node, "build_validator_fn",
                                      " (build_validator_fn=None: validation.enable is refused for this model)")
            for flavor, args in flavors.v.d.items():
                self.it.steps = 0
                self.it.skipped = []
                self.it.module_mode = True
                self.apply_job_config(args)
                try:
                    built = self.it.call(model_cls, [args], {}, self._dummy, P.Frame(mod, {}, None))
                except (P.EvalError, RecursionError) as exc:
                    model["unreadable"].append((flavor, str(exc)))
                    continue
                except Exception as exc:  # noqa: BLE001 - a construct the interpreter mishandles: say so, go on
                    model["unreadable"].append((flavor, f"the generator failed here ({type(exc).__name__}: {exc})"))
                    continue
                finally:
                    self.it.module_mode = False
                facts = self.facts(args, built)
                facts.values["spec_name"] = key
                facts.values["module"] = modname
                if pipelining is not None:
                    facts.values["pipelining"], facts.cites["pipelining"] = pipelining
                if validator is not None:
                    facts.values["validator"], facts.cites["validator"] = validator
                source = self.at(args.v.loc[0], args.v.loc[1]) if isinstance(args.v, P.Obj) and args.v.loc \
                    else self.at(mod.rel, node.lineno)
                skipped = sorted({f"not followed: {loc[0]}:{loc[1]}: {why}" for loc, why in self.it.skipped
                                  if "Parameter" in why or "parameter" in why})
                model["flavors"][flavor] = (facts, source, skipped)
            models[key] = model
        return {"models": models, "unreadable": unreadable}

    def job_config(self) -> V | None:
        """The default ``JobConfig`` (every field its default), as a training run without overrides has."""
        if not hasattr(self, "_job_config"):
            self._job_config = None
            mod = self.it.module("torchtitan.config.job_config") or self.it.module("torchtitan.config")
            if mod is not None and "JobConfig" in mod.globals:
                cls = self.it._resolve_global(mod, "JobConfig")
                if isinstance(cls.v, P.CRef):
                    self._job_config = self.it.instantiate(cls.v, [], {}, (mod.rel, cls.v.info.node.lineno))
        return self._job_config

    def apply_job_config(self, args: V) -> None:
        """What the trainer does before building the model: ``model_args.update_from_config(job_config)``
        (it sets run-time fields such as deepseek's ``moe_impl``), with the default job config."""
        if not isinstance(args.v, P.Obj):
            return
        cls, entry = self.it.class_member(args.v.info, "update_from_config")
        job = self.job_config()
        if entry is None or entry[0] != "func" or job is None:
            return
        func = entry[1]
        try:
            locals_ = self.it.bind(func, [args, job], {}, (func.mod.rel, func.node.lineno))
        except P.EvalError:
            return
        self.it.run_tolerant(func.node.body, P.Frame(func.mod, locals_, func.closure))

    def _pipelining(self, spec: V, mod, node):
        return self._spec_fn(spec, mod, node, "pipelining_fn",
                             " (pipelining_fn=None: the trainer refuses pp > 1 for this model)")

    def _spec_fn(self, spec: V, mod, node, field: str, when_none: str):
        """(whether the TrainSpec sets ``field`` to a function, the line that says so), None when unknown."""
        fn = self.attr(spec, field)
        line = next((kw.lineno for n in ast.walk(node) if isinstance(n, ast.Call)
                     for kw in n.keywords if kw.arg == field), node.lineno)
        if isinstance(fn.v, P.Unknown):
            return None
        return fn.v is not None, self.at(mod.rel, line) + ("" if fn.v is not None else when_none)

    # ------------------------------------------------------------------ facts

    def facts(self, args: V, model: V) -> Facts:
        facts = Facts()
        if isinstance(self.attr(args, "depth_single_blocks").v, int):
            return self.flux_facts(args, model, facts)
        for name in ("dim", "vocab_size"):
            facts.put(name, self.attr(args, name))
        layers = self.attr(model, "layers")
        if isinstance(layers.v, P.Dct):
            blocks = list(layers.v.d.values())
            facts.put("n_layers", V(len(blocks), layers.v.len_o | layers.o))
        elif isinstance(layers.v, P.Lst):
            blocks = list(layers.v.items)
            facts.put("n_layers", V(len(blocks), self.it.len_origin(layers)))
        else:
            why = self.it.skipped[0] if self.it.skipped else None
            outside = [b for b in self.it.external_bases(model.v.info) if not b.startswith("torch")] \
                if isinstance(model.v, P.Obj) else []
            text = "the model's __init__ builds no layers that can be followed statically" + \
                (f" ({why[0][0]}:{why[0][1]}: {why[1]})" if why else "") + \
                (f" (it builds them in {', '.join(outside)}, outside the source tree)" if outside else "")
            for fact in ("n_layers", "n_heads"):
                facts.lack(fact, text)
            return facts
        attn_type = self.attr(args, "attn_type")  # sdpa / flex / varlen: what context parallelism accepts
        if isinstance(attn_type.v, str):
            facts.put("attn_type", attn_type)
        tied = self.attr(args, "enable_weight_tying")
        if isinstance(tied.v, bool):
            facts.put("tied", tied)
        elif not isinstance(args.v, P.Obj) or "enable_weight_tying" not in self.it.field_names(args.v.info):
            facts.values["tied"] = False
            info = model.v.info
            facts.cites["tied"] = f"{self.at(info.mod.rel, info.node.lineno)}: {info.qualname} has no weight " \
                                  "tying (its args have no enable_weight_tying)"
        attn = [self.attr(b, "attention") for b in blocks]
        attn = [a for a in attn if isinstance(a.v, P.Obj)]
        self.attention(attn, facts)
        dense = [self.attr(b, "feed_forward") for b in blocks]
        dense = [d for d in dense if isinstance(d.v, P.Obj)]
        moe = [(i, self.attr(b, "moe")) for i, b in enumerate(blocks)]
        moe = [(i, m) for i, m in moe if isinstance(m.v, P.Obj)]
        self.same(facts, "ffn_hidden_dim", [self.attr(self.attr(d, "w1"), "out_features") for d in dense],
                  "no dense feed-forward layer" if not dense else "")
        if moe:
            o = EMPTY
            for b in blocks:
                o = o | self.attr(b, "moe").o | self.attr(b, "feed_forward").o
            facts.put("moe_layers", V(len(moe), o | self.it.len_origin(layers)))
            facts.values["moe_layer_ids"] = _ranges([i for i, _ in moe])
            facts.origins["moe_layer_ids"] = facts.origins["moe_layers"]
            experts = [self.attr(m, "experts") for _, m in moe]
            self.same(facts, "num_experts", [self.arg(e, "num_experts") for e in experts])
            self.same(facts, "top_k", [self.attr(self.attr(m, "router"), "top_k") for _, m in moe])
            self.same(facts, "moe_hidden_dim", [self.arg(e, "hidden_dim") for e in experts])
            shared = [self.attr(m, "shared_experts") for _, m in moe]
            if all(s.v is None for s in shared):
                facts.put("shared_experts", V(0, union_all(shared)))
            else:
                widths = [self.attr(self.attr(s, "w1"), "out_features") for s in shared]
                self.same(facts, "shared_hidden_dim", widths)
                sh, mh = facts.values.get("shared_hidden_dim"), facts.values.get("moe_hidden_dim")
                if isinstance(sh, int) and isinstance(mh, int) and mh and sh % mh == 0:
                    facts.values["shared_experts"] = sh // mh
                    facts.origins["shared_experts"] = \
                        facts.origins["shared_hidden_dim"] | facts.origins["moe_hidden_dim"]
                    facts.cites["shared_experts"] = "shared expert width / expert width"
                    del facts.values["shared_hidden_dim"]
        total, notes = self.count(model)
        if total is not None:
            if facts.values.get("tied"):
                out = self.attr(model, "output")
                if isinstance(out.v, P.Leaf) and isinstance(out.v.numel, int):
                    total -= out.v.numel  # the embedding shares the output's weight
            facts.values["params"] = total
            facts.cites["params"] = "counted from the module tree the model's __init__ builds (torch.nn modules " \
                                    "and nn.Parameters)"
        facts.notes.extend(notes)
        return facts

    def flux_facts(self, args: V, model: V, facts: Facts) -> Facts:
        facts.put("dim", self.attr(args, "hidden_size"))
        facts.put("n_heads", self.attr(args, "num_heads"))
        if "n_heads" in facts.values:
            facts.values["n_kv_heads"] = facts.values["n_heads"]
            facts.origins["n_kv_heads"] = facts.origins["n_heads"]
        double, single = self.attr(model, "double_blocks"), self.attr(model, "single_blocks")
        if isinstance(double.v, P.Lst) and isinstance(single.v, P.Lst):
            facts.put("n_layers", V(len(double.v.items) + len(single.v.items),
                                    self.it.len_origin(double) | self.it.len_origin(single)))
            facts.cites["n_layers"] = \
                f"{len(double.v.items)} double-stream + {len(single.v.items)} single-stream blocks"
        facts.lack("vocab_size", "a diffusion model: no vocabulary")
        facts.values["attention"] = "mmdit"
        info = model.v.info
        facts.cites["attention"] = f"{info.qualname}: double- and single-stream blocks " \
                                   f"({self.at(info.mod.rel, info.node.lineno)})"
        total, notes = self.count(model)
        if total:
            facts.values["params"] = total
            facts.cites["params"] = "counted from the module tree the model's __init__ builds (torch.nn modules " \
                                    "and nn.Parameters)"
        facts.notes.extend(notes)
        return facts

    def arg(self, obj: V, name: str) -> V:
        if isinstance(obj.v, P.Obj) and obj.v.args and name in obj.v.args:
            return obj.v.args[name]
        return self.attr(obj, name)

    def attention(self, attn: list, facts: Facts) -> None:
        if not attn:
            facts.lack("n_heads", "no attention module")
            return
        self.same(facts, "n_heads", [self.attr(a, "n_heads") for a in attn])
        info = attn[0].v.info
        facts.cites["attention"] = f"the layers' {info.qualname} ({self.at(info.mod.rel, info.node.lineno)})"
        if all(isinstance(self.attr(a, "kv_lora_rank").v, int) for a in attn):
            facts.values["attention"] = "mla"
            for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                self.same(facts, name, [self.attr(a, name) for a in attn])
            self.same(facts, "head_dim", [self.attr(a, "qk_head_dim") for a in attn])
            if "n_heads" in facts.values:
                facts.values["n_kv_heads"] = facts.values["n_heads"]
                facts.origins["n_kv_heads"] = facts.origins["n_heads"]
                facts.cites["n_kv_heads"] = "MLA: one K/V head per query head (tensor parallelism shards by head)"
            return
        facts.values["attention"] = "gqa"
        self.same(facts, "n_kv_heads", [self.attr(a, "n_kv_heads") for a in attn])
        self.same(facts, "head_dim", [self.attr(a, "head_dim") for a in attn])
        put_qk_norm(facts, [self.attr(a, n) for a in attn for n in ("q_norm", "k_norm")])

    def same(self, facts: Facts, name: str, vals: list, why_none: str = "") -> None:
        if not vals:
            if why_none:
                facts.lack(name, why_none)
            return
        bad = next((v for v in vals if isinstance(v.v, P.Unknown) or v.v is None), None)
        if bad is not None:
            facts.lack(name, bad.v.describe() if isinstance(bad.v, P.Unknown) else "not set")
            return
        distinct = {repr(v.v) for v in vals}
        if len(distinct) > 1:
            facts.lack(name, f"differs between layers ({', '.join(sorted(distinct))})")
            return
        facts.put(name, V(vals[0].v, union_all(vals)))

    def count(self, model: V) -> tuple:
        seen: set = set()
        unknown: list = []

        def walk(val: V) -> int:
            v = val.v
            if id(v) in seen:
                return 0
            if isinstance(v, P.Leaf):
                seen.add(id(v))
                if v.numel is None:
                    unknown.append(v.kind)
                    return 0
                return v.numel
            if isinstance(v, P.Obj):
                seen.add(id(v))
                if self.it.is_dataclass(v.info):
                    return 0  # the args, not a module
                return sum(walk(x) for x in list(v.fields.values()))
            if isinstance(v, (P.Lst, P.Dct)):
                seen.add(id(v))
                return sum(walk(x) for x in (v.items if isinstance(v, P.Lst) else list(v.d.values())))
            return 0

        total = walk(model)
        notes = [f"params: {len(unknown)} module(s) of a size not known statically are not counted "
                 f"({', '.join(sorted(set(unknown)))})"] if unknown else []
        return total, notes


def read_all(root: str, commit: str) -> dict:
    result = V02Reader(root, commit).read_all()
    result["registered"], result["registered_source"] = registered_names(root, commit)
    return result


def registered_names(root: str, commit: str) -> tuple:
    """The TrainSpec names ``get_train_spec`` accepts without a user registration: the literal
    ``_supported_models`` and ``_supported_experiments`` frozensets (protocols/train_spec.py imports them)."""
    names, cites = set(), []
    for rel, var in (("torchtitan/models/__init__.py", "_supported_models"),
                     ("torchtitan/experiments/__init__.py", "_supported_experiments")):
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            return None, None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == var for t in node.targets):
                try:
                    value = ast.literal_eval(node.value.args[0] if isinstance(node.value, ast.Call) and node.value.args
                                             else node.value)
                except (ValueError, SyntaxError):
                    return None, None
                names |= {v for v in value if isinstance(v, str)}
                cites.append(f"{rel}:{node.lineno} @ {commit}")
                break
        else:
            return None, None
    return sorted(names), "; ".join(cites)
