"""Write the flag table of Megatron-LM's argument parser (every option pretrain_gpt.py accepts) from its source.

    PYTHONPATH=<Megatron-LM checkout at core_v0.16.1>:<its pure-Python deps> \\
        python -m meshlint.frameworks.megatron.generate --write /path/to/Megatron-LM

The parser is partly built from dataclasses (megatron/training/argument_utils.py turns
TransformerConfig fields into options), so the table comes from the parser itself:
``add_megatron_arguments(ArgumentParser(allow_abbrev=False))``, exactly as ``parse_args``
builds it (megatron/training/arguments.py:87-93). Only the generator imports Megatron; the
static path reads the JSON it writes (``flags_core_0_16.json`` beside this file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "flags_core_0_16.json")


def _kind(action) -> str:
    name = type(action).__name__
    return {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
            "_StoreConstAction": "store_const", "BooleanOptionalAction": "bool_optional",
            "_AppendAction": "append", "_HelpAction": "help", "_CountAction": "count"}.get(name, name)


def _plain(value):
    """A JSON-able default: literals as they are, anything else (an enum, a torch dtype) by its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return {"repr": repr(value)}


def _type(action) -> str | None:
    t = action.type
    if t is None:
        return None
    if t in (int, float, str):
        return t.__name__
    return getattr(t, "__name__", repr(t))


def table(root: str) -> dict:
    sys.path.insert(0, root)
    from megatron.training.arguments import add_megatron_arguments  # the generator only

    parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    flags = {}
    _add_actions(flags, parser._actions, None)
    for extra, (rel, function) in EXTRAS.items():  # the entry scripts' extra_args_provider
        more = argparse.ArgumentParser(allow_abbrev=False)
        _function(os.path.join(root, rel), function)(more)
        _add_actions(flags, more._actions, extra)
    commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"framework": "megatron-core", "version": "0.16.1", "tag": "core_v0.16.1",
            "commit": commit or "55ac7082517c3878ae653c07c09c534b8aed49f6",
            "source": "megatron/training/arguments.py add_megatron_arguments (parse_args: allow_abbrev=False); "
                      "extra: the options an entry script's extra_args_provider adds",
            "entries": ENTRIES,
            "flags": dict(sorted(flags.items()))}


# extra_args_provider of the entry scripts (pretrain_gpt.py:348, pretrain_mamba.py:367: add_modelopt_args when
# nvidia-modelopt is installed; pretrain_vlm.py:448: add_vlm_extra_args)
EXTRAS = {"modelopt": ("megatron/post_training/arguments.py", "add_modelopt_args"),
          "vlm": ("pretrain_vlm.py", "add_vlm_extra_args")}
ENTRIES = {"pretrain_gpt.py": ["modelopt"], "pretrain_mamba.py": ["modelopt"], "pretrain_vlm.py": ["vlm"],
           "pretrain_bert.py": [], "pretrain_t5.py": [], "pretrain_ict.py": [],
           "pretrain_vision_classify.py": [], "pretrain_vision_dino.py": [], "pretrain_vision_inpaint.py": []}


def _function(path: str, name: str):
    """One top-level function of a file, defined alone (its module's imports are not run)."""
    import ast

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"argparse": argparse}
    exec(compile(ast.Module([node], []), path, "exec"), namespace)  # noqa: S102 - the generator only
    return namespace[name]


def _add_actions(flags: dict, actions: list, extra: str | None) -> None:
    for action in actions:
        kind = _kind(action)
        if kind == "help":
            continue
        entry = {"dest": action.dest, "kind": kind, "type": _type(action), "default": _plain(action.default),
                 "nargs": action.nargs if not isinstance(action.nargs, int) else action.nargs,
                 "choices": [_plain(c) for c in action.choices] if action.choices is not None else None}
        if kind == "store_const":
            entry["const"] = _plain(action.const)
        if extra:
            entry["extra"] = extra
        for option in action.option_strings:
            flags.setdefault(option, entry)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="ROOT", help="Megatron-LM checkout to read")
    args = ap.parse_args(argv)
    if not args.write:
        ap.error("--write ROOT is required")
    data = table(args.write)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=0, sort_keys=False)
        f.write("\n")
    print(f"{len(data['flags'])} options -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
