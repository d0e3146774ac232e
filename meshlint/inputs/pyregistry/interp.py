"""The abstract interpreter of one config function: its parts put together, positions, the rebuild
torchtitan does, kinds."""

from __future__ import annotations

import ast

from meshlint.inputs.pyregistry.values import ClassRef, _Limit, MAX_STEPS, ModuleVal, Obj, _Return, Sym, U
from meshlint.inputs.pyregistry.checkout import Module, Reader
from meshlint.inputs.pyregistry.frame import _display, Frame, _is_class_name, _SENTINEL, _Uncertain
from meshlint.inputs.pyregistry.stmts import Statements
from meshlint.inputs.pyregistry.exprs import Expressions
from meshlint.inputs.pyregistry.calls import Calls
from meshlint.inputs.pyregistry.library import Library


class Interp(Statements, Expressions, Calls, Library):
    """Evaluates one config function (and what it calls) of one registry file."""

    def __init__(self, reader: Reader, top: Module):
        self.reader = reader
        self.top = top
        self.checkout = reader.checkout
        self.depth = 0            # helper / derivation depth; positions are real only at 0
        self.site = None          # (line, col) in the top function of the call being followed
        self.steps = 0
        self.nest = 0
        self.max_nest = reader.max_nest
        self.gcache: dict = {}
        self.stack: set = set()
        self.derived: list = []
        self.limited = False      # a bound was hit: the result is not reused as a snapshot
        self.raised = False       # the function raises when run

    # -- positions and unknowns ------------------------------------------------
    def here(self, node, mod: Module) -> tuple[int, int]:
        if self.depth == 0 and mod is self.top:
            return mod.pos(node)
        return self.site or _SENTINEL

    def unknown(self, reason: str, node, mod: Module) -> U:
        if self.depth == 0 and mod is self.top:
            line, col = mod.pos(node)
            return U(reason, line, col, self.top.path)
        line, col = self.site or _SENTINEL
        where = f"{mod.rel}:{getattr(node, 'lineno', '?')}"
        return U(f"{reason} (at {where})", line, col, self.top.path, True)

    def tick(self) -> None:
        self.steps += 1
        reader = self.reader
        reader.spent += 1
        if self.steps > MAX_STEPS:
            raise _Limit(f"more than {MAX_STEPS:,} evaluation steps (a documented bound of the static reader)")
        if reader.spent > reader.budget:
            raise _Limit("the evaluation budget for this file is spent (it grows with the file's size)")


    # -- the rebuild torchtitan does ---------------------------------------------------
    def rebuild(self, obj: Obj, fdef, mod: Module) -> None:
        """Run the returned config class's ``__post_init__`` on the final values.

        torchtitan's ConfigManager hands the loaded config to ``tyro.cli(default=...)``,
        which constructs it again, so ``__post_init__`` sees the values the function
        returns (torchtitan/config/manager.py, parse_args). It matters for RL, where
        ``Controller.Config.__post_init__`` writes the trainer's token counts from the
        batcher (torchtitan/experiments/rl/controller.py). The section classes'
        ``__post_init__`` only validate at b5bcd76c6 and are not run.
        """
        cls = obj.ref if isinstance(obj.ref, ClassRef) else None
        kind = self.obj_kind(obj)
        if cls is None and isinstance(obj.ref, Sym) and kind == "controller":
            resolved = self.resolve(obj.ref)
            cls = resolved if isinstance(resolved, ClassRef) else None
            if cls is None:
                trainer = obj.fields.get("trainer")
                if isinstance(trainer, Obj):
                    trainer.fields["training"] = U(
                        f"{obj.cls}.__post_init__ (which may set the trainer's training values) is not in the "
                        "checkout being read", *mod.pos(fdef), mod.path)
                return
        if cls is None:
            return
        post = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "__post_init__"), None)
        if post is None or len(post.args.args) != 1:
            return
        saved = (self.depth, self.site)
        self.depth, self.site = self.depth + 1, mod.pos(fdef)
        try:
            self.exec_block(post.body, Frame(cls.mod, {post.args.args[0].arg: obj}))
        except _Return:
            pass
        except _Uncertain as unc:
            self.poison(obj, unc.unknown)
        finally:
            self.depth, self.site = saved

    # -- kinds -----------------------------------------------------------------------
    def symbolic(self, node, mod: Module, hops: int = 0):
        """A class expression (annotation, base class) as a Sym/ClassRef, without forcing it."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200 and hops < 2:
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            return self.symbolic(parsed, mod, hops + 1)
        if isinstance(node, ast.Name):
            return self.global_value(mod, node.id, node, Frame(mod, {}))
        if isinstance(node, ast.Attribute) and hops < 12:
            base = self.symbolic(node.value, mod, hops + 1)
            if isinstance(base, (Sym, ClassRef, ModuleVal)):
                return self.get_attr(base, node.attr, node, Frame(mod, {}))
            return None
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        return None

    def class_kind(self, display: str | None, ref, hops: int = 0) -> str | None:
        parts = display.split(".") if display else []
        if len(parts) >= 2 and parts[-1] == "Config":
            owner = parts[-2]
            if owner.endswith("Trainer"):
                return "trainer"
            if owner.endswith("Controller"):
                return "controller"
        if hops > 6:
            return None
        cls = ref
        if isinstance(ref, Sym) and _is_class_name(ref.parts[-1]):
            cls = self.resolve(ref)
        if isinstance(cls, ClassRef):
            for base in cls.node.bases:
                value = self.symbolic(base, cls.mod)
                kind = self.class_kind(_display(value), value, hops + 1)
                if kind:
                    return kind
        return None

    def obj_kind(self, obj: Obj) -> str | None:
        if obj.kind is None:
            kind = self.class_kind(obj.cls, obj.ref)
            if kind is None:
                trainer = obj.fields.get("trainer")
                if isinstance(trainer, Obj) and self.obj_kind(trainer) == "trainer":
                    kind = "controller"
                elif any(f in obj.fields for f in ("parallelism", "training", "model_spec")):
                    kind = "trainer"
            obj.kind = kind or ""
        return obj.kind or None
