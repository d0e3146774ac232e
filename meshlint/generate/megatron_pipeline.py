"""One walk of what Megatron-LM (core_v0.16.1) runs from the parsed options to a built TransformerConfig, for ML982.

The config's checks see the options as validate_args left them and as core_transformer_config_from_args
translated them, not as the launch wrote them. This walks, in order and with ML983's walker
(megatron_validate_checks.py): the config fields' dataclass defaults (for the fields no option sets),
parse_args after its parser ran (its yaml check), initialize_megatron's statements before validate_args, validate_args to its end, core_transformer_config_from_args
(its ``kw_args['x'] = ...`` are writes to the field x; the copy of every same-named option changes nothing, as
the config's fields and the options share the names ``args.x`` here), then TransformerConfig.__post_init__
(ModelParallelConfig's inlined where it calls it) under the guard that the class built is not the heterogeneous
one. Names of the release that compare by identity (enum members, activation functions) are tokens
(megatron_symbols.py). The asserts/raises of parse_args, core_transformer_config_from_args and both __post_init__ are the
walk's sites, keyed ``file:line``; megatron_config_checks.py makes checks of them with the slice they depend on.
"""

from __future__ import annotations

import ast
from pathlib import Path

from meshlint.generate import megatron_symbols as symbols
from meshlint.generate import megatron_validate_checks as replay

ARGS = replay.ARGS
MPC = "megatron/core/model_parallel_config.py"
TC = "megatron/core/transformer/transformer_config.py"
BUILD = "core_transformer_config_from_args"
RECORD = "kw_args"  # the dict core_transformer_config_from_args passes to the class as keyword arguments
PARSE = "parse_args"
FUNCTIONS = {PARSE: ARGS, BUILD: ARGS, "ModelParallelConfig.__post_init__": MPC, "TransformerConfig.__post_init__": TC}


def _method(tree: ast.Module, cls: str, name: str):
    return next(item for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls
                for item in node.body if isinstance(item, ast.FunctionDef) and item.name == name)


def _fields(trees: dict) -> list:
    """(class, field, line, default node or None) of ModelParallelConfig's then TransformerConfig's fields."""
    out = []
    for rel, cls in ((MPC, "ModelParallelConfig"), (TC, "TransformerConfig")):
        node = next(n for n in trees[rel].body if isinstance(n, ast.ClassDef) and n.name == cls)
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                out.append((cls, item.target.id, item.lineno, item.value))
    return out


def walk(root: Path, dests: set) -> replay._Walk:
    """The combined walk of the checkout ``root``; ``dests``: the parser's option names."""
    root = Path(root)
    trees = {rel: ast.parse((root / rel).read_text(encoding="utf-8")) for rel in (ARGS, MPC, TC)}
    build = next(n for n in trees[ARGS].body if isinstance(n, ast.FunctionDef) and n.name == BUILD)
    mpc, tc = _method(trees[MPC], "ModelParallelConfig", "__post_init__"), _method(trees[TC], "TransformerConfig",
                                                                                  "__post_init__")
    parse = next(n for n in trees[ARGS].body if isinstance(n, ast.FunctionDef) and n.name == PARSE)
    w = replay._Walk(root, trees[ARGS], function=replay.FUNCTION, supers={"__post_init__": mpc},
                     owners={build: ARGS, mpc: MPC, tc: TC, parse: ARGS}, symbols=symbols.merged(root, (ARGS, MPC, TC)))
    # a field no option sets (hasattr(args, f) is false unless validate_args sets it) keeps its class default
    ctx = {"fn": "defaults", "args": "self", "locals": set(), "depth": 0, "at": None, "own": False}
    for _, name, line, default in _fields(trees):
        if default is not None and not isinstance(default, ast.Call):
            w.deleted["args." + name] = ast.unparse(w.rename(default, ctx))
        if name in dests:
            continue
        if default is None:
            w.step(line, "args." + name, [], None, "a field with no default", ctx)
        elif isinstance(default, ast.Call):  # field(default_factory=...) or field(default=...)
            value = next((k.value for k in default.keywords if k.arg == "default"), None)
            w.step(line, "args." + name, [], None if value is None else w.rename(value, ctx),
                   None if value is not None else "a default_factory", ctx)
        else:
            w.step(line, "args." + name, [], w.rename(default, ctx), None, ctx)
    # parse_args up to its last statement holding a check (the yaml one): what follows sets rank and world size
    # from the environment, which the checks after it read as the launch's
    last = max(i for i, node in enumerate(parse.body) if any(isinstance(n, (ast.Assert, ast.Raise)) for n in ast.walk(node)))
    parse_ctx = {"fn": PARSE, "args": "args", "locals": set(), "depth": 0, "at": None, "own": ARGS, "record": None}
    w.body(parse.body[:last + 1], [], None, parse_ctx)
    replay._entry(w, root)
    w.walk_function(w.functions[replay.FUNCTION], "args", [], None, 0)
    first = len(w.guards)
    w.walk_function(build, build.args.args[0].arg, [], None, 0, record=RECORD)
    # the class it builds: a guard of core_transformer_config_from_args that picks another class whose
    # __post_init__ does not run TransformerConfig's first on the same fields (the heterogeneous one reads a file)
    other = [[g["id"], False] for g in w.guards[first:] for node in ast.walk(build)
             if isinstance(node, ast.If) and node.lineno == g["line"] and _picks_other_class(node, trees, root)]
    w.walk_function(tc, tc.args.args[0].arg, other, None, 0)
    return w


def _picks_other_class(node: ast.If, trees: dict, root: Path) -> bool:
    """Whether the If's body sets ``config_class`` to a class whose __post_init__ does not begin by calling
    TransformerConfig's (a subclass that does, MLATransformerConfig, runs the same checks first)."""
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "config_class" for t in stmt.targets):
            name = ast.unparse(stmt.value)
            return not _calls_super_first(name, root)
    return False


def _calls_super_first(cls: str, root: Path) -> bool:
    module = ARGS[:-3].replace("/", ".")
    target = symbols.imports(ast.parse((root / ARGS).read_text(encoding="utf-8")), module).get(cls)
    found = symbols.definition(root, *target) if target and target[1] else None
    if not found or not isinstance(found[1], ast.ClassDef):
        return False
    post = next((i for i in found[1].body if isinstance(i, ast.FunctionDef) and i.name == "__post_init__"), None)
    if post is None:
        return True
    first = next((s for s in post.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))), None)
    return isinstance(first, ast.Expr) and ast.unparse(first.value) == "super().__post_init__()"
