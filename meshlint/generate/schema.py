"""Generate a framework's full config schema (every section, key, type, default, enum) from its source, with ``ast`` only.

Regenerating for a new version is one command (nothing is imported or executed)::

    python -m meshlint.generate.schema --framework kempnerforge \\
        --source ../shared/frameworks/KempnerForge-5666d0d --version 5666d0d --commit 5666d0d
    git -C /work/.mirror/pytorch+torchtitan/repo archive v0.1.0 torchtitan | tar -x -C /tmp/tt010
    python -m meshlint.generate.schema --framework torchtitan --source /tmp/tt010 --version 0.1.0 --commit f7084fc78
    python -m meshlint.generate.schema --framework torchtitan \\
        --source ../shared/frameworks/torchtitan-v0.2-9810191bb-parent --version 0.2.x --commit 9810191bb^
    pip download --no-deps torchtitan==0.3.0 -d /tmp/tt && unzip -q /tmp/tt/*.whl -d /tmp/tt/src
    python -m meshlint.generate.schema --framework torchtitan --source /tmp/tt/src --version 0.3.0 --commit 0.3.0
    python -m meshlint.generate.schema --framework torchtitan \\
        --source ../shared/frameworks/torchtitan-b5bcd76c6 --version main@b5bcd76c6 --commit b5bcd76c6

writes ``meshlint/data/schema/<framework>-<version>.json`` (``--out`` to write elsewhere,
``--check`` to compare with the committed file instead). What the file holds:

* ``classes``: every config dataclass reachable from the root config, its fields in
  dataclass order (inherited ones included) with type, default (a literal, the class a
  ``default_factory`` builds, or ``default_expr`` with the source text when it is not a
  literal), allowed values (``Literal[...]``, an ``Enum``, or a plain membership test in
  ``__post_init__``, cited, with the conditions it sits under), the ``__post_init__``
  checks that read the field, and ``path:line`` of everything;
* ``tables``: the dotted path of every table (section, nested table, ``[[array]]``
  element) and the classes that can stand there (the declared class; in torchtitan's
  registry era also its subclasses; KempnerForge's ``[vlm]`` by its ``arch``);
* ``loader``: how the framework reads the file, each fact cited at the line where the
  generator found it (it fails loudly when a loader changed shape, so a new version is
  never described with an old version's facts).

The parts: ``schema_index`` (the source's modules and classes, names resolved as Python imports would),
``schema_reader`` (dataclasses -> schema entries), this module (tables, the per-framework loader facts,
the command line). ``meshlint/frameworks/schema_data.py`` reads these files; ``tests/test_schema_generated.py``
regenerates them from the reference trees and compares.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path

from meshlint.generate.schema_index import ClassInfo, GenerateError, Index, _last, _MAX_DEPTH, Module
from meshlint.generate.schema_reader import Reader


FORMAT = 1
OUT_DIR = Path(__file__).resolve().parent.parent / "data" / "schema"


# ----------------------------------------------------------------------------- tables

def dataclasses_in(typ: dict) -> tuple[list[str], bool]:
    """The dataclass classes a type holds a table of, and whether it is an array of tables."""
    kind = typ["kind"]
    if kind == "dataclass":
        return [typ["class"]], False
    if kind == "optional":
        return dataclasses_in(typ["of"])
    if kind == "union":
        found = [c for t in typ["of"] for c in dataclasses_in(t)[0] if t["kind"] in ("dataclass", "optional")]
        return found, False
    if kind == "list" or (kind == "tuple" and typ.get("variadic")):
        inner = typ["of"] if kind == "list" else typ["of"][0]
        classes, _ = dataclasses_in(inner)
        return classes, bool(classes)
    return [], False


def build_tables(reader: Reader, root: ClassInfo, variants: str, dispatch: dict) -> dict:
    """dotted table path -> the classes that can stand there ("" is the root).

    ``variants``: "declared" (the loader builds exactly the annotated class: TOML
    loaders), or "subclasses" (Python code may pass any subclass: registry era).
    ``dispatch``: {declared qn: {"key", "default", "map": {value: qn}, "source"}}
    for a loader that picks the subclass from a key (KempnerForge's [vlm] arch).
    """
    index = reader.index
    tables: dict[str, dict] = {}

    def candidates(declared: list[str]) -> list[str]:
        out = []
        for qn in declared:
            if qn in dispatch:
                out.extend(dispatch[qn]["map"].values())
                continue
            out.append(qn)
            if variants == "subclasses":
                out.extend(c.qn for c in index.subclasses(index.classes[qn]) if reader.fields(c))
        return list(dict.fromkeys(out))

    def visit(path: str, declared: list[str], default: str | None, optional: bool, array: bool, ancestry: tuple,
              depth: int = 0):
        classes = candidates(declared)
        table = {"classes": classes}
        if default:
            table["default_class"] = default
        if optional:
            table["optional"] = True
        if array:
            table["array"] = True
        for qn in declared:
            if qn in dispatch:
                table["dispatch"] = {k: v for k, v in dispatch[qn].items()}
        if path in tables:  # reached twice (shouldn't): merge
            tables[path]["classes"] = list(dict.fromkeys(tables[path]["classes"] + classes))
            return
        tables[path] = table
        if depth > _MAX_DEPTH:
            table["truncated"] = "nesting deeper than the generator follows"
            return
        children: dict[str, dict] = {}
        for qn in classes:
            entry = reader.class_entry(index.classes[qn])
            for name, key in entry["keys"].items():
                if key.get("cli") is False and variants == "subclasses":
                    continue  # model_spec & co.: set by code, not by configs
                inner, is_array = dataclasses_in(key["type"])
                if not inner:
                    continue
                child = children.setdefault(name, {"declared": [], "default": None, "optional": False, "array": is_array})
                child["declared"] = list(dict.fromkeys(child["declared"] + inner))
                child["default"] = child["default"] or key.get("default_factory")
                child["optional"] |= key["type"]["kind"] == "optional" or key.get("default") is None and "default" in key
                # a class met at several paths keeps the first: a checker derives the child's path from its own
                key.setdefault("table", f"{path}.{name}".lstrip(".") + ("[]" if is_array else ""))
        for name, child in children.items():
            sub = f"{path}.{name}".lstrip(".") + ("[]" if child["array"] else "")
            same = next((p for p, held in reversed(ancestry) if set(child["declared"]) & set(held)), None)
            if same is not None:
                # a config nesting its own kind (a loss wrapping a loss): read as the table it repeats
                tables[sub] = {"classes": child["declared"], "recursive": True, "same_as": same}
                continue
            visit(sub, child["declared"], child["default"], child["optional"], child["array"],
                  ancestry + ((path, tuple(classes)),), depth + 1)

    reader.class_entry(root)
    visit("", [root.qn], root.qn, False, False, ())
    return tables


# ----------------------------------------------------------------------------- per framework

def _find(mod: Module, pattern: str, what: str) -> str:
    """``rel:line`` of the first line matching ``pattern`` (regex) in ``mod``; fails loudly."""
    rx = re.compile(pattern)
    for i, line in enumerate(mod.lines, 1):
        if rx.search(line):
            return f"{mod.rel}:{i}"
    raise GenerateError(f"{mod.rel}: cannot find {what} (pattern {pattern!r}); the loader changed shape: "
                        f"read it again and update meshlint/generate/schema.py")


def _module(index: Index, name: str) -> Module:
    if name not in index.modules:
        raise GenerateError(f"module {name} not found under {index.root}")
    return index.modules[name]


def _registries(index: Index, module: str, cls_name: str) -> dict:
    """KempnerForge's component registry: list_<x>() method -> category and the names registered for it."""
    mod = index.modules.get(module)
    if mod is None or cls_name not in mod.classes:
        return {}
    methods = {n.name: n for n in mod.classes[cls_name].node.body if isinstance(n, ast.FunctionDef)}

    def category(fn, call: str) -> str | None:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == call \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                return node.args[0].value
        return None

    lists = {name: category(fn, "list") for name, fn in methods.items() if name.startswith("list_")}
    registers = {name: category(fn, "register") for name, fn in methods.items() if name.startswith("register_")}
    names: dict[str, dict] = {}
    for m in index.modules.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in registers \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.setdefault(registers[node.func.attr], {})[node.args[0].value] = f"{m.rel}:{node.lineno}"
    return {name: {"category": cat, "names": dict(sorted(names.get(cat, {}).items()))}
            for name, cat in lists.items() if cat}


def kempnerforge(index: Index) -> dict:
    registries = _registries(index, "kempnerforge.config.registry", "Registry")
    reader = Reader(index, registries)
    root = index.classes.get("kempnerforge.config.job.JobConfig")
    if root is None:
        raise GenerateError("kempnerforge/config/job.py: class JobConfig not found")
    loader = _module(index, "kempnerforge.config.loader")
    vlm = index.classes["kempnerforge.config.vlm.VLMConfig"]
    arch_map = {}
    reg = next((r for r in registries.values() if r["category"] == "vlm_config"), None)
    for sub in index.subclasses(vlm):
        for deco in sub.node.decorator_list:
            if isinstance(deco, ast.Call) and _last(deco.func) == "register_vlm_config" and deco.args:
                ok, name = reader.literal(sub.module, deco.args[0])
                if ok:
                    arch_map[name] = sub.qn
    if not arch_map or reg is None:
        raise GenerateError("kempnerforge: no registered VLMConfig subclasses found")
    dispatch = {vlm.qn: {"key": "arch", "default": reader.class_entry(vlm)["keys"]["arch"]["default"],
                         "map": dict(sorted(arch_map.items())),
                         "source": _find(loader, r"if dc_type is VLMConfig", "the [vlm] arch dispatch"),
                         "unknown": "ValueError: Unknown vlm.arch: {arch!r}. Registered: [...]",
                         "unknown_source": _find(loader, r"f\"Unknown vlm\.arch", "the unknown-arch error")}}
    tables = build_tables(reader, root, "declared", dispatch)
    facts = {
        "unknown_keys": {
            "refused": "every table: each section, nested tables, [[array]] elements, [vlm] by its arch",
            "message": "ValueError: Unknown config keys in {class}: {sorted unknown}. Valid keys: {sorted fields}",
            "source": [_find(loader, r"unknown = set\(data\.keys\(\)\) - field_names", "the unknown-key check"),
                       _find(loader, r"Reject unknown keys", "the unknown-key check of sections")],
            "stage": "load_config (before anything else runs)",
        },
        "types": {
            "model": "kempnerforge",
            "rules": "int field: a str or float goes through int() (a float is truncated, a non-numeric str raises "
                     "ValueError); float field: a str or int goes through float(); bool field: a str is true when it is "
                     "'true', '1' or 'yes' (any case), anything else through bool(); Literal[...]: a value outside "
                     "raises ValueError; Enum: Enum(value) raises ValueError for an unknown value; list field: a "
                     "scalar becomes a one-element list; tuple field: a list becomes a tuple (length unchecked); a "
                     "union of several types, a str field, a dict field: kept as given (no conversion, no check)",
            "source": _find(loader, r"def _coerce_value", "_coerce_value"),
            "not_a_table": "a scalar where a section or nested table belongs is kept as is and fails later",
        },
        "cli": {
            "form": "--section.key=value (value parsed with ast.literal_eval, else kept as a str, then converted as "
                    "above); --section.key alone means true; tokens that do not start with -- are ignored, so "
                    "'--distributed.tp 4' sets tp to int('true') and fails, and '--train.compile_model false' "
                    "leaves compile_model true",
            "source": _find(loader, r"def _parse_cli_overrides", "_parse_cli_overrides"),
        },
        "post_init": "each section's __post_init__ runs when the loader builds it, so its checks refuse the config at load",
        "section_defaults": "instance",
        "section_defaults_note": "a section the file writes is rebuilt from the default JobConfig()'s section, whose "
                                 "__post_init__ already ran: what it filled in stays (a [model] without n_kv_heads "
                                 "keeps the default instance's 32, not its own n_heads)",
        "section_defaults_source": _find(loader, r"kwargs\[f\.name\] = current_val", "unset fields from the instance"),
        "post_init_source": _find(_module(index, "kempnerforge.config.loader"), r"return dc_type\(\*\*kwargs\)",
                                  "construction of each section"),
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


def torchtitan(index: Index) -> dict:
    if "torchtitan.config.job_config" in index.modules:
        return _torchtitan_toml(index)
    if "torchtitan.config_manager" in index.modules:  # v0.1.0: JobConfig and ConfigManager in one module
        return _torchtitan_toml_010(index)
    return _torchtitan_registry(index)


def _torchtitan_toml_010(index: Index) -> dict:
    """torchtitan v0.1.0 (torchtitan/config_manager.py): the same TOML + tyro loading as 0.2.x, but
    ``_dict_to_dataclass`` copies only the fields the class has, so an unknown key or section is dropped
    without a word, and the extension is ``experimental.custom_args_module``."""
    reader = Reader(index)
    root = index.classes.get("torchtitan.config_manager.JobConfig")
    if root is None:
        raise GenerateError("torchtitan/config_manager.py: class JobConfig not found")
    manager = _module(index, "torchtitan.config_manager")
    # the loop that copies only the known fields: a loader that starts refusing unknown keys must fail here
    copy_known = _find(manager, r"^\s+if f\.name in data:$", "the copy of the known fields only")
    if any("invalid_fields" in line or "Invalid field names" in line for line in manager.lines):
        raise GenerateError(f"{manager.rel}: refuses unknown keys now; read it again and update "
                            "meshlint/generate/schema.py")
    tables = build_tables(reader, root, "declared", {})
    facts = {
        "era": "toml",
        "unknown_keys": {
            "refused": False,
            "ignored": "every table: each section and the top level; an unknown section is dropped with all it holds",
            "message": "nothing: ConfigManager._dict_to_dataclass builds each class from the fields it has and "
                       "drops every other key of the file without a word, so its value has no effect",
            "source": [_find(manager, r"def _dict_to_dataclass", "_dict_to_dataclass"), copy_known],
            "stage": "ConfigManager.parse_args, before tyro",
            "extension": "experimental.custom_args_module (or --experimental.custom_args_module) merges a user "
                         "JobConfig dataclass into JobConfig first: its fields are then read too",
            "extension_source": _find(manager, r"def _maybe_add_custom_args", "_maybe_add_custom_args"),
        },
        "types": {
            "model": "keep",
            "rules": "_dict_to_dataclass converts nothing: every value is kept as the file gives it; tyro.cli then "
                     "receives the result as its default and only warns when the type does not match; the wrong "
                     "value fails, or is misread, where the code uses it",
            "source": [_find(manager, r"result\[f\.name\] = value$", "the value copied as is"),
                       _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli with the file as default")],
            "not_a_table": "a scalar where a section belongs is kept as is and fails later",
        },
        "cli": {
            "form": "tyro: --section.key value or --section.key=value (hyphens or underscores); booleans are flags "
                    "(--training.compile, --training.no-compile); an unknown flag exits 2 ('Unrecognized options'); "
                    "a value tyro cannot parse for the type, or outside a Literal, exits 2",
            "source": _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli"),
        },
        "post_init": "a section's __post_init__ runs when _dict_to_dataclass builds it (at load)",
        "read_at_load": {
            "experimental.custom_args_module": {
                "source": _find(manager, r'module_path = experimental\.get\("custom_args_module"\)',
                                "the custom module read from the file"),
                "refuses": "a truthy non-string (importlib.import_module fails on it)",
                "ints_pass": False, "falsy_pass": True},
            "model.tokenizer_path": {
                "source": _find(manager, r"if not os\.path\.exists\(self\.config\.model\.tokenizer_path\)",
                                "the tokenizer_path check"),
                "refuses": "a non-string other than an int (os.path.exists)",
                "ints_pass": True, "falsy_pass": False},
        },
        "post_init_source": _find(manager, r"return cls\(\*\*result\)", "construction of each section"),
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


def _torchtitan_toml(index: Index) -> dict:
    reader = Reader(index)
    root = index.classes.get("torchtitan.config.job_config.JobConfig")
    manager = _module(index, "torchtitan.config.manager")
    tables = build_tables(reader, root, "declared", {})
    facts = {
        "era": "toml",
        "unknown_keys": {
            "refused": "every table: each section and nested table ([training.dataloader], [quantize.linear.float8], ...)",
            "message": "ValueError: Invalid field names in {class} data: {set of unknown}.\\nPlease modify your .toml "
                       "config file or override these fields from the command line.",
            "source": [_find(manager, r"if invalid_fields := set\(data\) - valid_fields", "the unknown-key check")],
            "stage": "ConfigManager.parse_args, before tyro",
            "extension": "job.custom_config_module (or --job.custom_config_module) merges a user dataclass into "
                         "JobConfig first: its fields are then valid too",
            "extension_source": _find(manager, r"def _maybe_add_custom_config", "_maybe_add_custom_config"),
        },
        "types": {
            "model": "keep",
            "rules": "_dict_to_dataclass converts nothing: every value is kept as the file gives it; tyro.cli then "
                     "receives the result as its default and only warns (UserWarning '... is annotated with type X, "
                     "but the default value V has type Y', tyro 1.0.17) when the type does not match, an int for a "
                     "float field included silently; the wrong value fails, or is misread, where the code uses it",
            "source": [_find(manager, r"result\[f\.name\] = value$", "the value copied as is"),
                       _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli with the file as default")],
            "not_a_table": "a scalar where a nested table belongs is kept as is and fails later",
        },
        "cli": {
            "form": "tyro: --section.key value or --section.key=value (hyphens or underscores); booleans are flags "
                    "(--compile.enable, --compile.no-enable); an unknown flag exits 2 ('Unrecognized options', with "
                    "'Perhaps you meant'); a value tyro cannot parse for the type, or outside a Literal, exits 2",
            "source": _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli"),
        },
        "post_init": "a section's __post_init__ runs when _dict_to_dataclass builds it (at load)",
        "read_at_load": {
            "job.custom_config_module": {"source": _find(manager, r'module_path = job\.get\("custom_config_module"\)',
                                                         "the custom module read from the file"),
                                         "refuses": "a truthy non-string (importlib.import_module fails on it)",
                                         "ints_pass": False, "falsy_pass": True},
            "model.hf_assets_path": {"source": _find(manager, r"if not os\.path\.exists\(self\.config\.model\.hf_assets_path",
                                                     "the hf_assets_path check"),
                                     "refuses": "a non-string other than an int (os.path.exists, then .endswith)",
                                     "ints_pass": True, "falsy_pass": False},
            "model.tokenizer_path": {"source": _find(manager, r"if self\.config\.model\.tokenizer_path:",
                                                     "the deprecated tokenizer_path"),
                                     "refuses": "a truthy non-string other than an int (copied to hf_assets_path)",
                                     "ints_pass": True, "falsy_pass": True},
        },
        "post_init_source": _find(manager, r"return cls\(\*\*result\)", "construction of each section"),
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


def _torchtitan_registry(index: Index) -> dict:
    reader = Reader(index)
    root = index.classes.get("torchtitan.trainer.Trainer.Config")
    if root is None:
        raise GenerateError("torchtitan/trainer.py: class Trainer.Config not found (neither TOML nor registry era?)")
    manager = _module(index, "torchtitan.config.manager")
    configurable = _module(index, "torchtitan.config.configurable")
    tables = build_tables(reader, root, "subclasses", {})
    facts = {
        "era": "registry",
        "unknown_keys": {
            "refused": "every config class: they are @dataclass(kw_only=True, slots=True), so an unknown keyword "
                       "argument raises TypeError and assigning an unknown attribute raises AttributeError",
            "message": "TypeError: {class}.__init__() got an unexpected keyword argument '{key}' / AttributeError: "
                       "'{class}' object has no attribute '{key}'",
            "source": [_find(configurable, r'if "__slots__" not in config_cls\.__dict__', "the slots enforcement")],
            "stage": "when the config function runs (ConfigManager._load_config calls it)",
            "variants": "a field may hold any subclass of its declared config class: a key is known when one of them has it",
        },
        "types": {
            "model": "keep",
            "rules": "Python does not check field types: values are kept as the code gives them; tyro.cli receives "
                     "the config as its default and only warns on a type mismatch; the wrong value fails, or is "
                     "misread, where the code uses it",
            "source": [_find(manager, r"self\.config = tyro\.cli\(", "tyro.cli with the config as default")],
        },
        "cli": {
            "form": "tyro: --section.key value or --section.key=value; booleans are flags; an unknown flag exits 2 "
                    "('Unrecognized options'); a value tyro cannot parse, or outside a Literal, exits 2",
            "source": _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli"),
        },
        "post_init": "a config's __post_init__ runs when the config function builds it",
        "read_at_load": {
            "hf_assets_path": {"source": _find(manager, r"self\.config\.hf_assets_path  # pyrefly", "the hf_assets_path check"),
                               "refuses": "a non-string other than an int (os.path.exists, then .endswith)",
                               "ints_pass": True, "falsy_pass": False},
        },
        "pseudo_sections": {"model": "model_spec=model_registry(flavor): meshlint records it as {name, flavor}"},
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


FRAMEWORKS = {
    "kempnerforge": (["kempnerforge"], kempnerforge),
    "torchtitan": (["torchtitan", "torchtitan_recipes"], torchtitan),
}


def generate(framework: str, source: str | Path, version: str, commit: str) -> dict:
    """The schema of ``framework`` as the source tree at ``source`` defines it (plain data, JSON-ready)."""
    if framework not in FRAMEWORKS:
        raise GenerateError(f"unknown framework {framework!r}: one of {', '.join(FRAMEWORKS)}")
    packages, build = FRAMEWORKS[framework]
    root = Path(source)
    if not (root / packages[0]).is_dir():
        raise GenerateError(f"{root}: no {packages[0]}/ package here")
    index = Index(root, packages)
    body = build(index)
    reachable = _reachable(body)
    classes = {qn: body["classes"][qn] for qn in sorted(reachable)}
    keys = sum(len(c["keys"]) for c in classes.values())
    return {
        "format": FORMAT,
        "framework": framework,
        "version": version,
        "commit": commit,
        "generated_by": f"python -m meshlint.generate.schema --framework {framework} --source DIR "
                        f"--version {version} --commit {commit}",
        "root": body["root"],
        "counts": {"tables": len(body["tables"]), "classes": len(classes), "keys": keys,
                   "root_table_keys": sum(len(classes[qn]["keys"]) for qn in body["tables"][""]["classes"])},
        "loader": body["loader"],
        "tables": dict(sorted(body["tables"].items())),
        "classes": classes,
    }


def _reachable(body: dict) -> set:
    out = set()
    for table in body["tables"].values():
        out.update(table["classes"])
    return {qn for qn in out if qn in body["classes"]}


def out_path(framework: str, version: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.@-]", "_", version)
    return OUT_DIR / f"{framework}-{safe}.json"


def dumps(schema: dict) -> str:
    return json.dumps(schema, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.schema", description=__doc__.split("\n")[0])
    parser.add_argument("--framework", required=True, choices=sorted(FRAMEWORKS))
    parser.add_argument("--source", required=True, help="the framework's source tree (holds its package folder)")
    parser.add_argument("--version", required=True, help="version id in the file name (5666d0d, 0.2.x, 0.3.0, main@b5bcd76c6)")
    parser.add_argument("--commit", required=True, help="the commit or release the source is at (cited in the file)")
    parser.add_argument("--out", help="write here instead of meshlint/data/schema/<framework>-<version>.json")
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it (exit 1 if it differs)")
    args = parser.parse_args(argv)
    try:
        schema = generate(args.framework, args.source, args.version, args.commit)
    except GenerateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = Path(args.out) if args.out else out_path(args.framework, args.version)
    text = dumps(schema)
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'up to date' if same else 'differs from the source: regenerate it'}")
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    c = schema["counts"]
    print(f"wrote {os.path.relpath(path)}: {c['tables']} tables, {c['classes']} classes, {c['keys']} keys")
    if not args.out:  # and its conditions, compiled ahead of time (meshlint/generate/schema_compiled.py)
        from meshlint.generate import schema_compiled

        return schema_compiled.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
