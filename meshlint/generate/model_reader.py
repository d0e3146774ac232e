"""Reading torchtitan's model flavors and their derived sizes from its source, with ``ast`` (for generate/models.py)."""

from __future__ import annotations

import ast
import os

from meshlint.generate import pyeval as P
from meshlint.generate.model_facts import Facts, _ranges, put_qk_norm, union_all
from meshlint.generate.model_refusals import _refusals_in
from meshlint.generate.pyeval import EMPTY, V

_TENSOR_FACTORIES = ("empty", "zeros", "ones", "randn", "rand", "full", "ones_like", "zeros_like")


class Reader:
    """Evaluates one tree's model registries and reads their config trees."""

    def __init__(self, root: str, commit: str):
        self.root = os.path.abspath(root)
        self.commit = commit
        self.it = P.Interp(self.root)
        self._dummy = ast.parse("pass").body[0]
        self.effects: list = []
        self._init_cache: dict = {}

    # ------------------------------------------------------------------ plumbing

    def frame(self, mod: P.Module) -> P.Frame:
        return P.Frame(mod, {}, None)

    def attr(self, obj: V, name: str) -> V:
        if not isinstance(obj.v, P.Obj):
            return V(P.Unknown(f"no {name}: not a config"))
        try:
            return self.it.getattr(obj, name, self._dummy, self.frame(obj.v.info.mod))
        except P.EvalError as exc:
            return V(P.Unknown(exc.reason, exc.loc))

    def has(self, obj: V, name: str) -> bool:
        if not isinstance(obj.v, P.Obj):
            return False
        if name in obj.v.fields:
            return True
        _, entry = self.it.class_member(obj.v.info, name)
        return entry is not None and entry[0] in ("field", "attr")

    def path(self, obj: V, *names: str) -> V:
        cur = obj
        for name in names:
            cur = self.attr(cur, name)
            if not isinstance(cur.v, P.Obj) and name != names[-1]:
                return V(P.Unknown(f"{'.'.join(names)}: {name} is not set"), cur.o)
        return cur

    def cite(self, origins: frozenset) -> str:
        by_file: dict = {}
        for rel, line in sorted(origins):
            by_file.setdefault(rel, []).append(line)
        parts = [f"{rel}:{','.join(str(x) for x in sorted(set(lines)))}" for rel, lines in by_file.items()]
        return f"{'; '.join(parts)} @ {self.commit}" if parts else f"(no literal) @ {self.commit}"

    def at(self, rel: str, line: int) -> str:
        return f"{rel}:{line} @ {self.commit}"

    # ------------------------------------------------------------------ registries

    def registries(self) -> list:
        """``(key, module name)`` of every package of the tree that defines ``model_registry``."""
        out = []
        for base, prefix in (("torchtitan/models", ""), ("torchtitan/experiments", "")):
            top = os.path.join(self.root, base)
            if not os.path.isdir(top):
                continue
            for dirpath, dirnames, filenames in sorted(os.walk(top)):
                dirnames.sort()
                dirnames[:] = [d for d in dirnames if d not in ("tests", "__pycache__")]
                if "__init__.py" not in filenames or dirpath == top:
                    continue
                path = os.path.join(dirpath, "__init__.py")
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                if any(isinstance(n, ast.FunctionDef) and n.name == "model_registry" for n in tree.body):
                    rel = os.path.relpath(dirpath, self.root)
                    out.append(rel.replace(os.sep, "."))
        return out

    def flavor_table(self, mod: P.Module, reg_node: ast.FunctionDef) -> tuple:
        """The module-level dict ``model_registry`` indexes by its flavor argument: (name, Dct, line)."""
        flavor_arg = (reg_node.args.posonlyargs + reg_node.args.args)[0].arg
        for node in ast.walk(reg_node):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and isinstance(node.slice, ast.Name) and node.slice.id == flavor_arg:
                val = mod.globals.get(node.value.id)
                if isinstance(val, P.Lazy):
                    val = self.it._resolve_global(mod, node.value.id)
                if isinstance(val, V) and isinstance(val.v, P.Dct):
                    return node.value.id, val.v, self._def_line(mod, node.value.id)
        # a registry that delegates to another one (graph_trainer/muse_glimmer): that one's flavors
        for node in ast.walk(reg_node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == flavor_arg \
                    and node.func.id in mod.globals:
                target = self.it._resolve_global(mod, node.func.id)
                if isinstance(target.v, P.Func) and target.v.node is not reg_node \
                        and target.v.node.name == "model_registry":
                    return self.flavor_table(target.v.mod, target.v.node)
        return None, None, 0

    def _def_line(self, mod: P.Module, name: str) -> int:
        for node in mod.tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return node.lineno
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                return node.lineno
        return 0

    def read_all(self) -> dict:
        """``{"models": {key: {"flavors": {flavor: entry}, ...}}, "unreadable": [...]}``."""
        models, unreadable = {}, []
        for modname in self.registries():
            try:
                mod = self.it.module(modname)
                reg_val = mod.globals.get("model_registry")
                reg_node = next(n for n in mod.tree.body
                                if isinstance(n, ast.FunctionDef) and n.name == "model_registry")
                table_name, table, table_line = self.flavor_table(mod, reg_node)
            except (P.EvalError, RecursionError) as exc:
                unreadable.append({"module": modname, "reason": str(exc)})
                continue
            key = modname.split(".", 2)[2] if modname.startswith("torchtitan.models.") else None
            if table is None:
                unreadable.append({"module": modname, "reason": f"{mod.rel}:{reg_node.lineno}: model_registry does "
                                                                "not index a literal flavor dict by its argument"})
                continue
            model = {"module": modname, "flavors": {}, "table": (mod.rel, table_line, table_name), "unreadable": []}
            for flavor in table.d:
                self.it.steps = 0
                self.effects = []
                try:
                    spec = self.call_registry(mod, reg_val, flavor)
                except (P.EvalError, RecursionError) as exc:
                    model["unreadable"].append((flavor, str(exc)))
                    continue
                except Exception as exc:  # noqa: BLE001 - a construct the interpreter mishandles: say so, go on
                    model["unreadable"].append((flavor, f"the generator failed here ({type(exc).__name__}: {exc})"))
                    continue
                if not isinstance(spec.v, P.Obj):
                    model["unreadable"].append((flavor, f"model_registry({flavor!r}) did not give a ModelSpec"))
                    continue
                spec_name = self.attr(spec, "name").v
                if key is None:
                    key = spec_name if isinstance(spec_name, str) else modname
                facts = self.flavor_facts(spec, mod, reg_node)
                facts.values["spec_name"] = spec_name if isinstance(spec_name, str) else None
                facts.values["module"] = modname
                entry_source = self.flavor_source(table.d[flavor], mod)
                model["flavors"][flavor] = (facts, entry_source,
                                            [f"not followed (side effects unknown): {e}" for e in self.effects])
            model["key"] = key or modname
            models[model["key"]] = model
        return {"models": models, "unreadable": unreadable}

    def call_registry(self, mod: P.Module, reg: V, flavor: str) -> V:
        frame = self.frame(mod)
        self.it.effect_hook = self._effect
        try:
            return self.it.call(reg, [V(flavor)], {}, self._dummy, frame)
        finally:
            self.it.effect_hook = None

    def _effect(self, where: tuple, reason: str) -> None:
        self.effects.append(f"{where[0]}:{where[1]}: {reason}")

    def flavor_source(self, fn: V, mod: P.Module) -> str:
        f = fn.v
        if isinstance(f, P.Partial):
            f = f.func.v
        if isinstance(f, P.Func):
            return self.at(f.mod.rel, f.node.lineno)
        if isinstance(f, P.Obj) and f.loc:
            return self.at(*f.loc)
        return self.cite(fn.o) if fn.o else self.at(mod.rel, 0)

    # ------------------------------------------------------------------ facts

    def flavor_facts(self, spec: V, mod: P.Module, reg_node) -> Facts:
        facts = Facts()
        model = self.attr(spec, "model")
        if not isinstance(model.v, P.Obj):
            facts.notes.append(f"the model config is not readable: "
                               f"{model.v.describe() if isinstance(model.v, P.Unknown) else type(model.v).__name__}")
            return facts
        if self.has(model, "layers") and isinstance(self.attr(model, "layers").v, P.Lst):
            self.decoder_facts(model, facts)
            self.mask_facts(model, facts)
        elif self.has(model, "double_blocks"):
            self.flux_facts(model, facts)
        elif self.has(model, "model_config"):
            self.hf_facts(model, facts)
        else:
            facts.notes.append(f"{model.v.info.qualname}: a config shape this generator does not read")
        if "params" not in facts.missing and not (self.has(model, "model_config")):
            total, notes = self.count_params(model)
            if total:
                facts.values["params"] = total
                facts.cites["params"] = "counted from the flavor's config tree (Linear, Embedding, norm, conv " \
                                        "leaves and the nn.Parameters the modules' __init__ create)"
                facts.notes.extend(notes)
        self.spec_facts(spec, mod, reg_node, facts)
        self.parallelize_facts(spec, facts)
        self.linear_facts(model, facts)
        return facts

    # ------------------------------------------------------------------ the Linear layers, by FQN

    def linear_facts(self, model: V, facts: Facts) -> None:
        """``linears``: every ``Linear.Config`` of the flavor's model config, named as
        ``model_config.traverse(Linear.Config)`` names it (torchtitan/config/configurable.py): the walk of
        the dataclass fields in their order, into lists (not tuples or dicts) and into every value that has
        ``traverse`` (a ``Configurable.Config``), stopping at a Linear.Config (a subclass too) without
        descending into it. That is what the converters that swap Linears see (NVFP4LinearConverter.convert
        substring-matches its fqns against these names). Written compactly by ``_compact``; left out, with a
        note, where a field on the way cannot be read (a Linear could hide there) or a Linear's features are
        not literal integers."""
        linear_cls = self._linear_config()
        if linear_cls is None:
            facts.lack("linears", "torchtitan/models/common/linear.py defines no Linear.Config here")
            return
        found: list = []
        problems: list = []
        origins = set()
        self._walk_linears(model, "", linear_cls, found, problems, origins, 0)
        if problems:
            facts.lack("linears", problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
            return
        compact = _compact(found)
        if compact is None:
            facts.lack("linears", "no compact order of the Linears gives back their traversal order")
            return
        facts.values["linears"] = compact
        facts.origins["linears"] = frozenset(origins)
        where = self._traverse_site()
        facts.cites["linears"] = (f"{len(found)} Linear.Config nodes, named as {where} names them"
                                  if where else f"{len(found)} Linear.Config nodes")

    def _linear_config(self):
        try:
            mod = self.it.module("torchtitan.models.common.linear")
        except P.EvalError:
            return None
        if mod is None:
            return None
        val = mod.globals.get("Linear")
        if isinstance(val, P.Lazy):
            val = self.it._resolve_global(mod, "Linear")
        if not isinstance(val, V) or not isinstance(val.v, P.CRef):
            return None
        _, entry = self.it.class_member(val.v.info, "Config")
        return entry[1] if entry is not None and entry[0] == "class" else None

    def _traverse_site(self) -> str:
        for rel in ("torchtitan/config/configurable.py",):
            path = os.path.join(self.root, rel)
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == "traverse":
                    return f"Configurable.Config.traverse(Linear.Config) ({rel}:{node.lineno} @ {self.commit})"
        return ""

    def _is_a(self, obj: V, cls) -> bool:
        return isinstance(obj.v, P.Obj) and any(c is cls for c in self.it.mro(obj.v.info))

    def _traversable(self, obj: V) -> bool:
        if not isinstance(obj.v, P.Obj):
            return False
        _, entry = self.it.class_member(obj.v.info, "traverse")
        return entry is not None and entry[0] == "func"

    def _walk_linears(self, obj: V, prefix: str, cls, found: list, problems: list, origins: set, depth: int) -> None:
        if depth > 64:
            problems.append(f"{prefix or 'the model config'}: nested too deeply to walk")
            return
        if self._is_a(obj, cls):
            self._linear(obj, prefix, found, problems, origins)
            return
        for name in self.it.field_names(obj.v.info):
            if self._classvar(obj.v.info, name):
                continue
            val = self.attr(obj, name)
            fqn = f"{prefix}.{name}" if prefix else name
            v = val.v
            if isinstance(v, P.Unknown):
                problems.append(f"{fqn}: {v.describe()}")
            elif isinstance(v, P.Obj):
                if self._is_a(val, cls):
                    self._linear(val, fqn, found, problems, origins)
                elif self._traversable(val):
                    self._walk_linears(val, fqn, cls, found, problems, origins, depth + 1)
            elif isinstance(v, P.Lst) and not isinstance(v, P.Tup):
                for i, item in enumerate(v.items):
                    if isinstance(item.v, P.Unknown):
                        problems.append(f"{fqn}.{i}: {item.v.describe()}")
                    elif self._is_a(item, cls):
                        self._linear(item, f"{fqn}.{i}", found, problems, origins)
                    elif self._traversable(item):
                        self._walk_linears(item, f"{fqn}.{i}", cls, found, problems, origins, depth + 1)

    def _classvar(self, info, name: str) -> bool:
        """A ``name: ClassVar[...]`` annotation: not a dataclass field (dataclasses.fields leaves it out)."""
        for c in self.it.mro(info):
            for stmt in c.node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                    return "ClassVar" in ast.unparse(stmt.annotation)
        return False

    def _linear(self, obj: V, fqn: str, found: list, problems: list, origins: set) -> None:
        i, o = self.attr(obj, "in_features"), self.attr(obj, "out_features")
        if not all(isinstance(x.v, int) and not isinstance(x.v, bool) for x in (i, o)):
            bad = i if not isinstance(i.v, int) else o
            problems.append(f"{fqn}: in/out features not literal "
                            f"({bad.v.describe() if isinstance(bad.v, P.Unknown) else type(bad.v).__name__})")
            return
        found.append((fqn, i.v, o.v))
        origins.update(i.o | o.o)

    def spec_facts(self, spec: V, mod: P.Module, reg_node, facts: Facts) -> None:
        fn = self.attr(spec, "pipelining_fn")
        line = next((kw.lineno for n in ast.walk(reg_node) if isinstance(n, ast.Call)
                     for kw in n.keywords if kw.arg == "pipelining_fn"), reg_node.lineno)
        if isinstance(fn.v, P.Unknown):
            facts.lack("pipelining", fn.v.describe())
        else:
            facts.values["pipelining"] = fn.v is not None
            facts.cites["pipelining"] = self.at(mod.rel, line) + (
                "" if fn.v is not None else " (pipelining_fn=None: trainer.py raises 'does not support pipelining' "
                                             "when pp > 1)")

    def parallelize_facts(self, spec: V, facts: Facts) -> None:
        """Refusals at the top of the model's parallelize function (kimi, qwen3_5: no context parallelism)."""
        fn = self.attr(spec, "parallelize_fn").v
        if isinstance(fn, P.Partial):
            fn = fn.func.v
        if not isinstance(fn, P.Func) or not isinstance(fn.node, ast.FunctionDef):
            return
        for kind, line in _refusals_in(fn.node):
            if kind not in facts.values:
                facts.values[kind] = True
                facts.cites[kind] = f"{self.at(fn.mod.rel, line)} ({fn.qualname})"

    def mask_facts(self, model: V, facts: Facts) -> None:
        """What the model's ``get_attention_masks`` gives under FlexAttention, which the trainer hands to the
        context-parallel load balancer: ``attn_masks`` = "block_mask" (the common Decoder's own method: one
        BlockMask) or "dict" (an override that returns a dict of masks), and ``attn_mask_keys``, the literal keys
        that override can write (left out when a key is computed). Returns that only build varlen metadata
        (a call whose name says varlen) are the varlen branch and are not counted."""
        owner = model.v.owner if isinstance(model.v, P.Obj) else None
        if owner is None:
            return
        for cls in self.it.mro(owner):
            fn = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "get_attention_masks"),
                      None)
            if fn is None:
                continue
            where = self.at(cls.mod.rel, fn.lineno)
            if cls.mod.rel == "torchtitan/models/common/decoder.py":
                facts.values["attn_masks"] = "block_mask"
                facts.cites["attn_masks"] = f"{where} ({cls.qualname}.get_attention_masks: one BlockMask under flex)"
                return
            kind, keys, line = _mask_returns(fn)
            if kind == "super":
                continue
            if kind != "dict":
                facts.lack("attn_masks", f"{cls.qualname}.get_attention_masks ({where}): returns what this "
                                         "generator does not read")
                return
            facts.values["attn_masks"] = "dict"
            facts.cites["attn_masks"] = f"{self.at(cls.mod.rel, line)} ({cls.qualname}.get_attention_masks returns " \
                                        "a dict of masks)"
            if keys is not None:
                facts.values["attn_mask_keys"] = sorted(keys)
                facts.cites["attn_mask_keys"] = f"{where} (the literal keys it can write; some only for some flavors)"
            else:
                facts.notes.append(f"attn_mask_keys: {cls.qualname}.get_attention_masks computes its keys")
            return

    def decoder_facts(self, model: V, facts: Facts) -> None:
        layers_v = self.attr(model, "layers")
        layers = layers_v.v.items
        facts.put("dim", self.attr(model, "dim"))
        facts.put("vocab_size", self.attr(model, "vocab_size"))
        facts.put("n_layers", V(len(layers), self.it.len_origin(layers_v)))
        if self.has(model, "enable_weight_tying"):
            facts.put("tied", self.attr(model, "enable_weight_tying"))
        attn, linear, dense, moe = [], [], [], []
        for i, layer in enumerate(layers):
            a = self.attr(layer, "attention") if self.has(layer, "attention") else V(None)
            if isinstance(a.v, P.Obj):
                attn.append((i, a))
            elif isinstance(a.v, P.Unknown):
                facts.notes.append(f"layer {i} attention: {a.v.describe()}")
            if self.has(layer, "delta_net"):
                d = self.attr(layer, "delta_net")
                if isinstance(d.v, P.Obj):
                    linear.append((i, d))
            ff = self.attr(layer, "feed_forward") if self.has(layer, "feed_forward") else V(None)
            if isinstance(ff.v, P.Obj):
                dense.append((i, ff))
            m = self.attr(layer, "moe") if self.has(layer, "moe") else V(None)
            if isinstance(m.v, P.Obj):
                moe.append((i, m))
        self.attention_facts(attn, linear, facts)
        self.same(facts, "ffn_hidden_dim", [self.path(ff, "w1", "out_features") for _, ff in dense],
                  "no dense feed-forward layer" if not dense else "")
        if moe:
            o = EMPTY
            for i, layer in enumerate(layers):
                o = o | self.attr(layer, "moe").o
            facts.put("moe_layers", V(len(moe), o | self.it.len_origin(layers_v)))
            facts.values["moe_layer_ids"] = _ranges([i for i, _ in moe])
            facts.origins["moe_layer_ids"] = facts.origins["moe_layers"]
            self.same(facts, "num_experts", [self.attr(m, "num_experts") for _, m in moe])
            self.same(facts, "top_k", [self.path(m, "router", "top_k") for _, m in moe])
            hidden = [self.path(m, "routed_experts", "inner_experts", "hidden_dim") for _, m in moe]
            self.same(facts, "moe_hidden_dim", hidden)
            shared = [self.attr(m, "shared_experts") for _, m in moe]
            if all(s.v is None for s in shared):
                facts.put("shared_experts", V(0, union_all(shared)))
            elif all(isinstance(s.v, P.Obj) for s in shared):
                widths = [self.path(s, "w1", "out_features") for s in shared]
                self.same(facts, "shared_hidden_dim", widths)
                sh, mh = facts.values.get("shared_hidden_dim"), facts.values.get("moe_hidden_dim")
                if isinstance(sh, int) and isinstance(mh, int) and mh and sh % mh == 0:
                    facts.values["shared_experts"] = sh // mh
                    facts.origins["shared_experts"] = \
                        facts.origins["shared_hidden_dim"] | facts.origins["moe_hidden_dim"]
                    facts.cites["shared_experts"] = "shared expert width / expert width"
                    del facts.values["shared_hidden_dim"]
                elif isinstance(sh, int):
                    facts.values["shared_experts"] = 1
                    facts.origins["shared_experts"] = facts.origins["shared_hidden_dim"]
                    facts.cites["shared_experts"] = "one shared expert of width shared_hidden_dim"
            else:
                facts.lack("shared_experts", "differs between MoE layers or is not readable")
        if self.has(model, "vision_encoder"):
            vision = self.attr(model, "vision_encoder")
            if isinstance(vision.v, P.Obj):
                heads = self.attr(vision, "num_heads")
                facts.put("vision_n_heads", heads)

    def attention_facts(self, attn: list, linear: list, facts: Facts) -> None:
        if not attn:
            facts.lack("n_heads", "no attention layer")
            return
        mla = all(self.has(a, "kv_lora_rank") for _, a in attn)
        kinds = [attn[0][1]] + ([linear[0][1]] if linear else [])
        facts.cites["attention"] = " and ".join(f"the layers' {k.v.info.qualname} "
                                                f"({self.at(k.v.info.mod.rel, k.v.info.node.lineno)})" for k in kinds)
        self.same(facts, "n_heads", [self.attr(a, "n_heads") for _, a in attn])
        if mla:
            facts.values["attention"] = "mla"
            for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                self.same(facts, name, [self.attr(a, name) for _, a in attn])
            nope, rope = facts.values.get("qk_nope_head_dim"), facts.values.get("qk_rope_head_dim")
            if isinstance(nope, int) and isinstance(rope, int):
                facts.values["head_dim"] = nope + rope
                facts.origins["head_dim"] = facts.origins["qk_nope_head_dim"] | facts.origins["qk_rope_head_dim"]
                facts.cites["head_dim"] = "MLA: qk_nope_head_dim + qk_rope_head_dim"
            if "n_heads" in facts.values:
                facts.values["n_kv_heads"] = facts.values["n_heads"]
                facts.origins["n_kv_heads"] = facts.origins["n_heads"]
                facts.cites["n_kv_heads"] = "MLA: one K/V head per query head (tensor parallelism shards by head)"
            return
        kv = []
        for _, a in attn:
            val = self.attr(a, "n_kv_heads")
            if val.v is None:
                qkv = self.attr(a, "qkv_linear")
                inner = self.attr(qkv, "n_kv_heads") if self.has(qkv, "n_kv_heads") else V(None)
                val = inner if isinstance(inner.v, int) else V(None, val.o)
            kv.append(val)
        if all(v.v is None for v in kv) and "n_heads" in facts.values:
            facts.values["n_kv_heads"] = facts.values["n_heads"]
            facts.origins["n_kv_heads"] = facts.origins["n_heads"] | union_all(kv)
            facts.cites["n_kv_heads"] = "n_kv_heads = None: as many KV heads as query heads"
        else:
            self.same(facts, "n_kv_heads", kv)
        hd = []
        for _, a in attn:
            val = self.attr(a, "head_dim")
            if val.v is None:
                qkv = self.attr(a, "qkv_linear")
                if self.has(qkv, "head_dim"):
                    val = self.attr(qkv, "head_dim")
            hd.append(val)
        self.same(facts, "head_dim", hd)
        # the attention config's qk_norm (Attention.Config: one RMSNorm.Config builds q_norm and k_norm), or a
        # config with q_norm and k_norm of its own; cited by the norms' widths (a config object has no line)
        norms = [self.attr(a, n) if self.has(a, n) else V(None) for _, a in attn
                 for n in (("qk_norm",) if self.has(a, "qk_norm") else ("q_norm", "k_norm"))]
        widths = [self.attr(n, w) for n in norms if isinstance(n.v, P.Obj)
                  for w in ("normalized_shape", "dim") if self.has(n, w)]
        put_qk_norm(facts, norms, widths)
        # the first full-attention layer's RoPE bounds the training sequence (Decoder.Config.max_context_length;
        # 0.3.0 names it max_seq_len)
        first = attn[0][1]
        if self.has(first, "rope"):
            rope = self.attr(first, "rope")
            for field in ("max_context_length", "max_seq_len"):
                if isinstance(rope.v, P.Obj) and self.has(rope, field):
                    length = self.attr(rope, field)
                    if isinstance(length.v, int):
                        facts.put("rope_max_len", length)
                    break
        facts.values["attention"] = "gqa" if not linear else "gqa+gated_deltanet"
        if linear:
            facts.put("linear_attention_layers", V(len(linear), union_all([d for _, d in linear])))
            keys = [self.div(self.path(d, "in_proj_q", "out_features"), self.attr(d, "key_head_dim"))
                    for _, d in linear]
            vals = [self.div(self.path(d, "in_proj_v", "out_features"), self.attr(d, "value_head_dim"))
                    for _, d in linear]
            self.same(facts, "linear_key_heads", keys)
            self.same(facts, "linear_value_heads", vals)

    def div(self, a: V, b: V) -> V:
        if isinstance(a.v, int) and isinstance(b.v, int) and b.v:
            return V(a.v // b.v, a.o | b.o)
        return V(P.Unknown("not readable"))

    def same(self, facts: Facts, name: str, vals: list, why_none: str = "") -> None:
        if not vals:
            if why_none:
                facts.lack(name, why_none)
            return
        known = [v for v in vals if not isinstance(v.v, P.Unknown)]
        if len(known) < len(vals):
            bad = next(v for v in vals if isinstance(v.v, P.Unknown))
            facts.lack(name, bad.v.describe())
            return
        distinct = {repr(v.v) for v in known}
        if len(distinct) > 1:
            facts.lack(name, f"differs between layers ({', '.join(sorted(distinct))})")
            return
        facts.put(name, V(known[0].v, union_all(known)))

    def flux_facts(self, model: V, facts: Facts) -> None:
        facts.put("dim", self.attr(model, "hidden_size"))
        facts.put("n_heads", self.attr(model, "num_heads"))
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

    def hf_facts(self, model: V, facts: Facts) -> None:
        cfg = self.attr(model, "model_config")
        names = {"n_layers": "n_layers", "n_heads": "n_heads", "n_kv_heads": "n_kv_heads", "dim": "dim",
                 "vocab_size": "vocab_size", "ffn_hidden_dim": "intermediate_size", "num_experts": "num_experts",
                 "top_k": "num_experts_per_tok", "moe_hidden_dim": "moe_intermediate_size"}
        for fact, field in names.items():
            if not self.has(cfg, field):
                continue
            val = self.attr(cfg, field)
            if val.v is None:
                facts.lack(fact, f"{field} = None: taken from the Hugging Face config.json at run time")
            else:
                facts.put(fact, val)
        facts.lack("params", "the model is built from the Hugging Face config at run time")

    # ------------------------------------------------------------------ parameters

    def count_params(self, model: V) -> tuple:
        notes: list = []
        memo: dict = {}
        total = self._count(model, notes, memo)
        if self.attr(model, "enable_weight_tying").v is True if self.has(model, "enable_weight_tying") else False:
            head = self.attr(model, "lm_head")
            i, o = self.attr(head, "in_features").v, self.attr(head, "out_features").v
            if isinstance(i, int) and isinstance(o, int):
                total -= i * o  # Decoder.__init__ ties tok_embeddings.weight to lm_head.weight
        return total, sorted(set(notes))

    def _count(self, val: V, notes: list, memo: dict) -> int:
        v = val.v
        if isinstance(v, P.Lst):
            return sum(self._count(x, notes, memo) for x in v.items)
        if isinstance(v, P.Dct):
            return sum(self._count(x, notes, memo) for x in v.d.values())
        if not isinstance(v, P.Obj):
            return 0
        leaf = self._leaf(val)
        direct, builds = self._init_scan(val, notes)
        if leaf is not None:
            return leaf + direct
        total = direct
        subs = [sub for sub in list(v.fields.values()) if isinstance(sub.v, (P.Obj, P.Lst, P.Dct))]
        counted: set = set()
        for sub in subs:
            if id(sub.v) in counted:
                continue
            counted.add(id(sub.v))
            times = 1
            if isinstance(sub.v, P.Obj):
                # one config in two fields is built once per field, unless __init__ was followed and
                # says how often it builds it (qk_norm: twice; a vision tower's block: num_layers times)
                fields = sum(1 for other in subs if other.v is sub.v)
                times = builds.get(id(sub.v), fields)
            total += times * self._count(sub, notes, memo)
        return total

    def _int(self, obj: V, name: str):
        if not self.has(obj, name):
            return None
        val = self.attr(obj, name).v
        return val if isinstance(val, int) and not isinstance(val, bool) else None

    def _leaf(self, obj: V) -> int | None:
        ext = self._ext_bases(obj)
        i, o = self._int(obj, "in_features"), self._int(obj, "out_features")
        if i is not None and o is not None:
            return i * o + (o if self.attr(obj, "bias").v is True else 0)
        n, d = self._int(obj, "num_embeddings"), self._int(obj, "embedding_dim")
        if n is not None and d is not None:
            return n * d
        shape = self._int(obj, "normalized_shape")
        if shape is not None:
            affine = self.attr(obj, "elementwise_affine").v if self.has(obj, "elementwise_affine") else True
            if affine is False:
                return 0
            with_bias = any(e.endswith("LayerNorm") for e in ext)
            return shape * (2 if with_bias else 1)
        ci, co = self._int(obj, "in_channels"), self._int(obj, "out_channels")
        k = self.attr(obj, "kernel_size").v if self.has(obj, "kernel_size") else None
        if ci is not None and co is not None and any("Conv" in e for e in ext):
            ks = [k] if isinstance(k, int) else [x.v for x in k.items] if isinstance(k, P.Lst) else None
            groups = self._int(obj, "groups") or 1
            if ks and all(isinstance(x, int) for x in ks):
                prod = 1
                for x in ks:
                    prod *= x
                return ci // groups * co * prod + (co if self.attr(obj, "bias").v is True else 0)
        return None

    def _ext_bases(self, obj: V) -> list:
        owner = obj.v.owner
        return self.it.external_bases(owner) if owner is not None else []

    def _init_scan(self, obj: V, notes: list) -> tuple:
        """Parameters the owner module's ``__init__`` creates itself, and how often it builds each sub-config."""
        owner = obj.v.owner
        if owner is None:
            return 0, {}
        total, builds = 0, {}
        for cls, func, creates in self._inits(owner):
            got, got_builds, failed = self._run_init(func, obj)
            total += got
            for k, n in got_builds.items():
                builds[k] = max(builds.get(k, 0), n)
            if failed and creates:
                notes.append(f"{cls.qualname}.__init__ ({cls.mod.rel}:{func.node.lineno}) was followed only in "
                             f"part ({failed[0]}); parameters it creates there are not counted")
        return total, builds

    def _inits(self, owner) -> list:
        """The ``__init__`` methods that run when the owner module is built (the first along its classes,
        then on through ``super().__init__``), those of them that create parameters or build sub-configs."""
        got = self._init_cache.get(id(owner))
        if got is None:
            got = []
            for cls in self.it.mro(owner):
                entry = self.it.class_ns(cls).get("__init__")
                if not entry or entry[0] != "func":
                    continue
                calls = [n for n in ast.walk(entry[1].node) if isinstance(n, ast.Call)]
                names = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                         for n in calls}
                # a build() in a loop or a comprehension, or one config built in two places (qk_norm: the
                # q and the k norm), builds it several times; other builds count once, as the walk does
                builds = [ast.unparse(c.func.value) for c in calls
                          if isinstance(c.func, ast.Attribute) and c.func.attr == "build"]
                repeated = len(set(builds)) < len(builds) or any(
                    isinstance(n, (ast.For, ast.While, ast.ListComp, ast.DictComp, ast.GeneratorExp))
                    and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "build"
                            for c in ast.walk(n))
                    for n in ast.walk(entry[1].node))
                if "Parameter" in names or repeated:
                    got.append((cls, entry[1], "Parameter" in names))
                calls_super = any(isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
                                  and isinstance(n.func.value, ast.Call) and isinstance(n.func.value.func, ast.Name)
                                  and n.func.value.func.id == "super" for n in calls)
                if not calls_super:
                    break  # a base __init__ called by name (Module.__init__(self)) creates no parameters here
            self._init_cache[id(owner)] = got
        return got

    def _run_init(self, func: P.Func, obj: V) -> tuple:
        it = self.it
        args = func.node.args.posonlyargs + func.node.args.args
        if len(args) < 2:
            return 0, {}, []
        locals_ = {args[0].arg: V(P.Unknown("self")), args[1].arg: obj}
        for a in args[2:] + func.node.args.kwonlyargs:
            if a.arg in func.defaults:
                locals_[a.arg] = func.defaults[a.arg]
        frame = P.Frame(func.mod, locals_, func.closure)
        created, builds, failed = [0], {}, []

        def hook(name: str, fargs: list, fkw: dict, loc):
            tail = name.rsplit(".", 1)[-1]
            if tail in _TENSOR_FACTORIES:
                dims = []
                for a in fargs:
                    if isinstance(a.v, P.Tup) or isinstance(a.v, P.Lst):
                        dims.extend(x.v for x in a.v.items)
                    else:
                        dims.append(a.v)
                if dims and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
                    n = 1
                    for d in dims:
                        n *= d
                    return V(_Shape(n))
                return V(P.Unknown("a tensor of a shape not known statically", loc))
            if tail == "Parameter" and fargs:
                if isinstance(fargs[0].v, _Shape):
                    created[0] += fargs[0].v.numel
                else:
                    failed.append(f"an nn.Parameter of unknown shape at {loc[0]}:{loc[1]}")
                return V(P.Unknown("a parameter", loc))
            return None

        def build_hook(target: V):
            builds[id(target.v)] = builds.get(id(target.v), 0) + 1

        it.ext_hook, it.build_hook = hook, build_hook
        try:
            for stmt in func.node.body:
                try:
                    it.exec_stmt(stmt, frame)
                except P.EvalError as exc:
                    failed.append(exc.reason)
                except (P._Return, P._Break, P._Continue):
                    break
        finally:
            it.ext_hook = it.build_hook = None
        return created[0], builds, failed


class _Shape:
    __slots__ = ("numel",)

    def __init__(self, numel: int):
        self.numel = numel


def _mask_returns(fn: ast.FunctionDef) -> tuple:
    """(kind, keys, line) of a ``get_attention_masks``: kind "super" (it returns the base class's masks), "dict"
    (a dict display, or a local bound to one: keys are the literal string keys of the display and of
    ``local["key"] = ...``, None when one is computed), or None (anything else, or a mix)."""
    returns = []

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Return):
                returns.append(child)
            walk(child)

    walk(fn)
    kinds, keys, line = set(), set(), fn.lineno
    computed = False
    for ret in returns:
        value = ret.value
        if isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
                    and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
                kinds.add("super")
            elif "varlen" in name:
                continue  # the varlen branch: metadata, not flex masks
            else:
                kinds.add(None)
        elif isinstance(value, ast.Dict):
            kinds.add("dict")
            line = ret.lineno
            computed |= _literal_keys(value.keys, keys)
        elif isinstance(value, ast.Name):
            bound = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))
                     and any(isinstance(t, ast.Name) and t.id == value.id
                             for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
            if len(bound) != 1 or not isinstance(bound[0].value, ast.Dict):
                kinds.add(None)
                continue
            kinds.add("dict")
            line = ret.lineno
            computed |= _literal_keys(bound[0].value.keys, keys)
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign):
                    slots = [t.slice for t in n.targets
                             if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == value.id]
                    computed |= _literal_keys(slots, keys)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                        isinstance(n.func.value, ast.Name) and n.func.value.id == value.id and \
                        n.func.attr in ("update", "setdefault", "__setitem__"):
                    computed = True
        else:
            kinds.add(None)
    if len(kinds) != 1:
        return None, None, line
    kind = kinds.pop()
    return kind, (None if computed else keys), line


def _literal_keys(nodes, keys: set) -> bool:
    """Add the string constants among ``nodes`` (dict keys, subscripts) to ``keys``; True when one is not one."""
    computed = False
    for k in nodes:
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            keys.add(k.value)
        else:
            computed = True
    return computed


def _compact(found: list) -> list | None:
    """The Linears ``(fqn, in, out)`` in traversal order, as TOML tables: the first integer part of an FQN (the
    index into a list of layers) becomes ``*``, and the Linears that then share name and features are one table
    with the indices as ranges (``ids = "0-2,4"``). The tables are in an order from which
    ``meshlint.frameworks.models.expand_linears`` gives back every name in traversal order: the groups (a list's Linears,
    or one Linear outside a list) by first occurrence, a list's tables in the order its items hold them (merged
    over items that hold different ones). None when no such order exists (then the fact is left out)."""
    from meshlint.frameworks.models import expand_linears

    rows: dict = {}       # (pattern, in, out) -> ids
    group_of: dict = {}   # (pattern, in, out) -> group: the pattern up to '*', or the key itself
    sequences: dict = {}  # group -> {id: [keys in traversal order]}
    group_order: list = []
    for fqn, i, o in found:
        parts = fqn.split(".")
        at = next((k for k, p in enumerate(parts) if p.isdigit()), None)
        if at is None:
            key = (fqn, i, o)
            group = key
        else:
            key = (".".join(parts[:at] + ["*"] + parts[at + 1:]), i, o)
            group = ".".join(parts[:at])
            sequences.setdefault(group, {}).setdefault(int(parts[at]), []).append(key)
        if group not in group_order:
            group_order.append(group)
        group_of[key] = group
        ids = rows.setdefault(key, [])
        if at is not None:
            ids.append(int(parts[at]))
    ordered: list = []
    for group in group_order:
        if group not in sequences:
            ordered.append(group)
            continue
        merged = _merge_orders(list(sequences[group].values()))
        if merged is None:
            return None
        ordered.extend(merged)
    out = []
    for pattern, i, o in ordered:
        row = {"fqn": pattern}
        if rows[(pattern, i, o)]:
            row["ids"] = _ranges(sorted(set(rows[(pattern, i, o)])))
        row["in_features"], row["out_features"] = i, o
        out.append(row)
    if [(e["fqn"], e["in_features"], e["out_features"]) for e in expand_linears(out)] != list(found):
        return None
    return out


def _merge_orders(sequences: list) -> list | None:
    """One order of the keys that keeps the order of every sequence (a topological sort, ties by first
    occurrence); None when the sequences contradict each other."""
    first: dict = {}
    after: dict = {}
    before_count: dict = {}
    for seq in sequences:
        for k in seq:
            first.setdefault(k, len(first))
            after.setdefault(k, set())
            before_count.setdefault(k, 0)
        for a, b in zip(seq, seq[1:]):
            if b not in after[a]:
                after[a].add(b)
                before_count[b] += 1
    ready = sorted((k for k, n in before_count.items() if n == 0), key=first.get)
    out = []
    while ready:
        k = ready.pop(0)
        out.append(k)
        for b in after[k]:
            before_count[b] -= 1
            if before_count[b] == 0:
                ready.append(b)
        ready.sort(key=first.get)
    return out if len(out) == len(first) else None


# ---------------------------------------------------------------------- trainer-side facts
