"""Build-time generator of config_checks_0_16.json: the refusals of Megatron-Core 0.16.1's config classes that read only options.

    python -m meshlint.generate.megatron_config_checks /path/to/Megatron-LM   # at tag core_v0.16.1

For each raise/assert of ModelParallelConfig/TransformerConfig.__post_init__ that refusals.py classifies
``open``, it keeps the site when its condition (the walker's text: enclosing ifs and the assert's negated test)
(rebuilt here from the source, fully parenthesised: the walker's text is for reading) reads nothing but
``self.<field>`` and literals, and every field read is copied unchanged from the Megatron-LM
option of the same name: not overridden by core_transformer_config_from_args (``kw_args['x'] = ...``), not set
by validate_args (``args.x = ...``), not reassigned by either __post_init__ before the site. A field with no
option takes its dataclass default when that is a literal. A member of a ``str`` enum the release defines
(``Fp8Recipe.delayed``) is its string (equal to it, hashed alike); the condition may call the evaluator's pure
builtins (pyexpr.py: isinstance on builtin types, len, any/all over a generator). A site that reads what
__post_init__ wrote or computed before it is walked by ML983's walker (megatron_validate_checks.py, ``self`` as
``args``, ``super().__post_init__()`` inlined) and kept with the slice of earlier guards and writes it depends
on (``replay``), where every field that slice reads as given is an option as above. Every other site, and
core_transformer_config_from_args' and parse_args' own, is replayed from the parsed options over the whole
build (``replay: pipeline``, megatron_pipeline.py: validate_args to its end, core_transformer_config_from_args,
__post_init__ up to the site); one even that cannot follow is listed as skipped with why.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from meshlint.frameworks.megatron import flags, pyexpr
from meshlint.generate import megatron_pipeline as pipeline
from meshlint.generate import megatron_refusals as refusals
from meshlint.generate import megatron_validate_checks as replay

OUT = Path(__file__).resolve().parent.parent / "frameworks" / "megatron" / "config_checks_0_16.json"
ARGS = "megatron/training/arguments.py"
CLASSES = {"ModelParallelConfig.__post_init__": ("megatron/core/model_parallel_config.py",),
           "TransformerConfig.__post_init__": ("megatron/core/model_parallel_config.py",
                                               "megatron/core/transformer/transformer_config.py")}
CONFIG_FILES = ("megatron/core/model_parallel_config.py", "megatron/core/transformer/transformer_config.py")
ALLOWED_NAMES = {"True", "False", "None"} | pyexpr.BUILTINS


def _function(tree: ast.AST, qualname: str):
    cls, _, meth = qualname.partition(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and (not meth or item.name == meth):
                    return item
            return node
    return None


def _assigned(func, owner: str) -> dict:
    """name -> first line where ``owner.name`` is assigned (=, +=, annotated) inside ``func``."""
    out: dict = {}
    for node in ast.walk(func):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == owner:
                    out[sub.attr] = min(out.get(sub.attr, node.lineno), node.lineno)
    return out


def _overridden(tree: ast.AST) -> set:
    """Config fields core_transformer_config_from_args sets from something else than the same-named option."""
    func = _function(tree, "core_transformer_config_from_args") or next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "core_transformer_config_from_args")
    out = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == "kw_args" \
                        and isinstance(t.slice, ast.Constant):
                    out.add(t.slice.value)
    return out


def _defaults(trees: list) -> dict:
    """Literal dataclass defaults of the config classes' fields (a field with no option keeps it)."""
    out: dict = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in ("ModelParallelConfig", "TransformerConfig"):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                        try:
                            out[item.target.id] = ast.literal_eval(item.value)
                        except ValueError:
                            out[item.target.id] = ...
    return out


def _conditions(func) -> tuple[dict, dict]:
    """line -> the full condition (an ast expression) of each raise/assert in ``func``, or None where a loop,
    try or match decides whether it runs; and line -> the statement's last line (a traceback may name any)."""
    out: dict = {}
    ends: dict = {}

    def walk(body: list, conds: list, opaque: bool) -> None:
        for node in body:
            if isinstance(node, ast.If):
                walk(node.body, conds + [node.test], opaque)
                walk(node.orelse, conds + [ast.UnaryOp(ast.Not(), node.test)], opaque)
            elif isinstance(node, ast.Raise):
                out[node.lineno] = None if opaque else conds
                ends[node.lineno] = node.end_lineno
            elif isinstance(node, ast.Assert):
                out[node.lineno] = None if opaque else conds + [ast.UnaryOp(ast.Not(), node.test)]
                ends[node.lineno] = node.end_lineno
            elif isinstance(node, (ast.For, ast.While, ast.Try, ast.With, ast.Match, ast.AsyncFor, ast.AsyncWith)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(node, field, []) or [], conds, True)
                for h in getattr(node, "handlers", []) or []:
                    walk(h.body, conds, True)
                for case in getattr(node, "cases", []) or []:
                    walk(case.body, conds, True)
            elif isinstance(node, (ast.Return, ast.Continue, ast.Break)):
                opaque = True  # what follows runs only on some paths
    walk(func.body, [], False)
    return {line: (None if c is None else ast.BoolOp(ast.And(), c) if len(c) > 1 else c[0] if c else
                   ast.Constant(True)) for line, c in out.items()}, ends


def _str_enums(root: Path, tree: ast.Module) -> dict:
    """``Cls.member`` -> its string, for each ``class Cls(str, enum.Enum)`` of megatron the module imports whose
    body is only string members (no method that could change how it compares)."""
    out: dict = {}
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("megatron.")):
            continue
        path = root / (node.module.replace(".", "/") + ".py")
        if not path.is_file():
            continue
        names = {a.name for a in node.names if a.asname is None}
        for cls in ast.parse(path.read_text(encoding="utf-8")).body:
            if not (isinstance(cls, ast.ClassDef) and cls.name in names and len(cls.bases) == 2
                    and ast.unparse(cls.bases[0]) == "str" and ast.unparse(cls.bases[1]) in ("enum.Enum", "Enum")):
                continue
            body = [b for b in cls.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if all(isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.targets[0], ast.Name)
                   and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str) for b in body):
                out.update({f"{cls.name}.{b.targets[0].id}": b.value.value for b in body})
    return out


def _enum_values(expr: ast.AST, enums: dict) -> ast.AST:
    """The expression with each known ``str`` enum member replaced by its string."""
    class R(ast.NodeTransformer):
        def visit_Attribute(self, n):
            text = ast.unparse(n)
            return ast.copy_location(ast.Constant(enums[text]), n) if text in enums else self.generic_visit(n)
    return R().visit(ast.parse(ast.unparse(expr), mode="eval").body)


def _fields(expr: ast.AST) -> tuple[set, str | None]:
    """The ``self.x`` fields an expression reads, or why it cannot be evaluated from fields alone."""
    fields = set()
    bound = {n.id for g in ast.walk(expr) if isinstance(g, ast.comprehension) for n in ast.walk(g.target)
             if isinstance(n, ast.Name)}
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                fields.add(node.attr)
            else:
                return fields, f"reads {ast.unparse(node)}"
        elif isinstance(node, ast.Name) and node.id not in ALLOWED_NAMES | bound and node.id != "self":
            return fields, f"reads the local {node.id}"
        elif isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in pyexpr.BUILTINS):
            return fields, f"calls {ast.unparse(node.func)}"
    return fields, None


def _sources(fields, why, sources) -> tuple[dict, dict, str | None]:
    """(field -> the option it is copied from, field -> its literal default, why not) for the fields a check reads
    that nothing before it in __post_init__ writes."""
    overridden, set_by_validate, dests, defaults = sources
    mapping, constants = {}, {}
    for f in sorted(fields):
        if why:
            break
        if f in overridden:
            why = f"core_transformer_config_from_args sets {f} from other options"
        elif f in set_by_validate:  # an option or not: the config gets args.f as validate_args leaves it
            why = f"validate_args changes args.{f}"
        elif f in dests:
            mapping[f] = f
        elif f in defaults and defaults[f] is not ...:
            constants[f] = defaults[f]
        else:
            why = f"{f} has no option and no literal default"
    return mapping, constants, why


def _walks(root: Path, trees: dict) -> dict:
    """Each __post_init__ walked in source order by ML983's walker (``self`` as ``args``; TransformerConfig's
    ``super().__post_init__()`` inlined): its guards, writes and sites."""
    mpc = _function(trees[CONFIG_FILES[0]], "ModelParallelConfig.__post_init__")
    out = {}
    for q, rel, supers in (("ModelParallelConfig.__post_init__", CONFIG_FILES[0], {}),
                           ("TransformerConfig.__post_init__", CONFIG_FILES[1], {"__post_init__": mpc})):
        walk = replay._Walk(root, trees[rel], function="__post_init__", supers=supers)
        walk.walk_function(_function(trees[rel], q), "self", [], None, 0)
        out[q] = walk
    return out


def _replayed(walk, site, sources) -> tuple[dict, str | None]:
    """A site's check with the slice of __post_init__ before it that its reads depend on, or why not."""
    overridden, set_by_validate, dests, defaults = sources
    check, why = replay._check(walk, site, set(defaults) | set(dests))
    if why:
        return {}, replay._plain(why.replace("validate_args sets", "__post_init__ sets"))
    reads = replay._reads(check["condition"]) | {v for g in check["needs_guards"] for v in
                                                 replay._reads(walk.guards[g]["test"])}
    reads |= {v for i in check["needs_steps"] for v in replay._reads(walk.steps[i]["value"])}
    # every field the slice reads, written before or not: where a write's guard fails, or before the write (a step
    # reading the field it writes), the value is the one the config was given, so its source must be the option's
    fields = {v[5:] for v in reads if v.startswith("args.")}
    mapping, constants, why = _sources(fields, None, sources)
    if why:
        return {}, why
    return {"condition": check["condition"], "end_line": check["end_line"], "guards": check["guards"],
            "needs_guards": check["needs_guards"], "needs_steps": check["needs_steps"], "replay": site.function,
            "args": mapping, "constants": constants}, None


PIPELINE = "pipeline"  # a check replayed over the whole walk, from the parsed options (megatron_pipeline.py)


def _pipelined(whole, site, row: dict, dests: dict, checks: list, skipped: list, why: str) -> None:
    """The site as a check of the whole walk (validate_args, core_transformer_config_from_args, __post_init__
    up to it), or skipped with why (the options-only path's reason first, where it had one)."""
    check, whole_why = replay._check(whole, site, set(dests), key=site.where)
    if whole_why is None:
        checks.append({**row, "shown": row["condition"], "condition": check["condition"], "end_line": check["end_line"],
                       "guards": check["guards"], "needs_guards": check["needs_guards"],
                       "needs_steps": check["needs_steps"], "options": check["options"], "replay": PIPELINE,
                       "args": {}, "constants": {}})
    else:
        whole_why = replay._plain(whole_why.replace("validate_args sets", "the walk sets"))
        skipped.append({**row, "why": f"{why}; from the parsed options: {whole_why}" if why else whole_why})


def build(root: Path) -> dict:
    root = Path(root)
    trees = {rel: ast.parse((root / rel).read_text(encoding="utf-8")) for rel in CONFIG_FILES + (ARGS,)}
    overridden = _overridden(trees[ARGS])
    set_by_validate = set(_assigned(_function(trees[ARGS], "validate_args") or next(
        n for n in ast.walk(trees[ARGS]) if isinstance(n, ast.FunctionDef) and n.name == "validate_args"), "args"))
    dests = flags.defaults()
    defaults = _defaults([trees[r] for r in CONFIG_FILES])
    conditions = {q: _conditions(_function(trees[CLASSES[q][-1]], q)) for q in CLASSES}
    sources = (overridden, set_by_validate, dests, defaults)
    walks = _walks(root, trees)
    enums = {k: v for rel in CONFIG_FILES for k, v in _str_enums(root, trees[rel]).items()}
    checks, skipped = [], []
    whole = pipeline.walk(root, set(dests))
    for site in refusals.enumerate_sites(root):
        if site.function not in pipeline.FUNCTIONS or refusals.classify(site, generated=False)[0] != "open":
            continue
        row = {"site": site.where, "function": site.function, "condition": site.condition,
               "message": site.message}
        if site.function not in CLASSES:  # core_transformer_config_from_args' own: only the whole walk reaches it
            _pipelined(whole, site, row, dests, checks, skipped, "")
            continue
        expr = conditions[site.function][0].get(site.line)
        row["end_line"] = conditions[site.function][1].get(site.line, site.line)
        reassigned: dict = {}
        for rel in CLASSES[site.function]:
            func = _function(trees[rel], next(q for q in CLASSES if CLASSES[q][-1] == rel))
            for name, line in _assigned(func, "self").items():
                if rel != site.file or line < site.line:
                    reassigned[name] = line
        why = None
        if expr is None:
            fields, why = set(), "a loop, try or early return decides whether it runs"
        else:
            expr = _enum_values(expr, enums)
            fields, why = _fields(expr)
            row["condition"] = ast.unparse(expr)
        reassigned_read = next((f for f in sorted(fields) if f in reassigned), None) if not why else None
        if reassigned_read:
            why = f"__post_init__ sets self.{reassigned_read} first"
        mapping, constants, why = _sources(fields, why, sources)
        if why and (why.startswith("__post_init__ sets") or why.startswith("reads the local")):
            check, replay_why = _replayed(walks[site.function], site, sources)
            if replay_why is None:
                checks.append({**row, **check})
                continue
            why = f"{why}; replayed: {replay_why}"
        if why:
            _pipelined(whole, site, row, dests, checks, skipped, why)
        else:
            checks.append({**row, "args": mapping, "constants": constants})
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    replays = {}
    for q, walk in {**walks, PIPELINE: whole}.items():  # each walk's guards and steps that a replayed check needs
        mine = [c for c in checks if c.get("replay") == q]
        replays[q] = {"guards": {str(g): walk.guards[g] for g in sorted({g for c in mine for g in c["needs_guards"]})},
                      "steps": {str(i): walk.steps[i] for i in sorted({i for c in mine for i in c["needs_steps"]})}}
    return {"framework": "megatron", "version": "0.16.1", "tag": "core_v0.16.1", "commit": commit or None,
            "generated_by": "python -m meshlint.generate.megatron_config_checks",
            "checks": checks, "skipped": skipped, "replays": replays,
            # the order in which the whole walk reaches each site of the config's build (tests compare the first)
            "order": {k: v["seq"] for k, v in whole.sites.items() if isinstance(k, str) and "seq" in v},
            # what tests/test_megatron_config_checks.py needs to build the config as Megatron-LM does
            "config_fields": sorted(defaults), "overridden": sorted(overridden)}


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    table = build(Path(argv[0]))
    OUT.write_text(json.dumps(table, indent=1, sort_keys=True, default=repr) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(table['checks'])} checks, {len(table['skipped'])} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
