"""The fuzzer's grammar and oracle: configs, rule packs and command lines, and what every run must satisfy.

Hypothesis strategies build inputs from the grammar of each dialect (the keys
come from the dialect modules' own ``KEYS``, so a new key is fuzzed the day it
is added), with hostile values mixed in: huge and 1,001-digit integers, nan,
inf, negative and zero sizes, strings with control characters and bidi
overrides, deep nesting, duplicate keys, bytes that are not UTF-8. torchtitan 0.3.0/main
registry files (Python read with ``ast``: classes and keys from the generated schemas, hostile
expressions, recursion, endless loops, derived configs, cut-off source), launch scripts (SBATCH
headers, torchrun lines with overrides; accelerate launch lines; Megatron-LM options in bash arrays), saved
JSON configs and Accelerate config YAML come from the same values. Rule packs
come from the rule schema (fields) and the expression grammar (facts,
operators, every function), with hostile expressions mixed in. Command lines
draw every flag of ``check``, ``explain``, ``diff`` and ``rules`` with valid
and invalid values, over regular files, directories, FIFOs and missing paths.

``run_case`` runs one command line in-process (meshlint's click app) and
returns what the oracle found wrong: a traceback, an exit code outside the
documented ones, output that is not valid JSON or not schema-valid, a raw
control character on a text stream. Used by tests/test_fuzz.py (a short
derandomized run in the suite) and bench/fuzz.py (the long run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from hypothesis import strategies as st

from meshlint import limits
from meshlint.frameworks.kempnerforge import v5666d0d as kempnerforge
from meshlint.frameworks.native import dialect as native
from meshlint.frameworks.torchtitan import v0_2 as torchtitan
from meshlint.engine.expr import FUNCTIONS
from meshlint.engine.facts import FACT_DOCS, GROUP_FIELDS

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "report-v1.schema.json").read_text())

# ------------------------------------------------------------------------------------------ TOML values

HOSTILE_TEXT = ("\x1b]0;owned\x07", "\x1b[2J", "\r", "\n", "\u202e", "\u2066", "\x00", "\x85", "\u2028", "\ufeff", "²",
                "\U0001f600", "é", "\\", '"', "'", "#", "=", "[", "{", ".", "%", ":", ",", "::error::x")


def toml_string(s: str) -> str:
    """A TOML basic string holding exactly ``s`` (control characters as \\u escapes)."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(k: str) -> str:
    return k if _BARE.match(k) else toml_string(k)


texts = st.one_of(
    st.sampled_from(["tp", "pp", "1f1b", "gpipe", "interleaved_1f1b", "Interleaved1F1B", "DualPipeV", "bf16",
                     "float32", "bfloat16", "llama3", "8B", "70B", "deepseek_v3", "debugmodel", "", "x" * 300]),
    st.lists(st.sampled_from(HOSTILE_TEXT), min_size=1, max_size=6).map("".join),
    st.text(max_size=20),
)

INTERESTING_INTS = [-(2**63), -(2**31), -1000, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 64, 100, 128,
                    1000, 4096, 65535, 65536, 2**20, limits.MAX_WORLD - 1, limits.MAX_WORLD, limits.MAX_WORLD + 1,
                    2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30]

def chance(one_in: int) -> st.SearchStrategy:
    """True one time in ``one_in`` (not integers(0, n) == 0: hypothesis draws 0 far more often than that)."""
    return st.sampled_from(range(one_in)).map(lambda i: i == one_in - 1)


def mostly(common: st.SearchStrategy, rare: st.SearchStrategy, one_in: int = 10) -> st.SearchStrategy:
    """``common``, and one time in ``one_in`` ``rare``: hostile values often enough to find bugs, rarely
    enough that most inputs still get past the first refusal to the code behind it."""
    # sampled_from, not integers(): hypothesis draws boundary integers far more often than 1 in n
    return st.sampled_from(range(one_in)).flatmap(lambda i: rare if i == one_in - 1 else common)


small_ints = st.one_of(st.sampled_from([1, 1, 2, 2, 4, 8, 16, 32, 64, 3, 0, -1]).map(str),
                       st.integers(-8, 128).map(str))
int_literals = mostly(st.one_of(small_ints, small_ints, st.sampled_from(INTERESTING_INTS).map(str)), st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(1, 64).map(lambda n: str(2**n)),
    st.sampled_from([20, 30, 401, limits.MAX_INT_DIGITS, limits.MAX_INT_DIGITS + 1, 4301, 5000]).map(lambda n: "9" * n),
    st.sampled_from(["0x10", "0o17", "0b101", "1_000", "-0", "+8", "0x" + "f" * 1100, "1" + "0" * 400]),
), 10)
float_literals = st.one_of(
    st.sampled_from(["nan", "+nan", "-nan", "inf", "+inf", "-inf", "1e308", "-1e308", "1e400", "1e-320", "0.5",
                     "-0.0", "0.0", "2.5", "4.0", "1.3", "0.1", "3.14159", "1" + "0" * 400 + ".5"]),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr).filter(lambda s: "e" not in s or "." in s),
)
scalar_literals = st.one_of(int_literals, float_literals, texts.map(toml_string), st.sampled_from(["true", "false"]),
                            st.just("1979-05-27T07:32:00Z"), st.just("07:32:00"))


@st.composite
def value_literal(draw, depth: int = 0):
    """Any TOML value: mostly scalars, sometimes arrays and inline tables, sometimes nested far too deep."""
    kind = draw(st.integers(0, 99))
    if kind < 80 or depth > 3:
        return draw(scalar_literals)
    if kind < 90:
        items = draw(st.lists(value_literal(depth + 1), max_size=4))
        return "[" + ", ".join(items) + "]"
    if kind < 98:
        keys = draw(st.lists(texts, max_size=3, unique=True))
        return "{ " + ", ".join(f"{toml_key(k)} = {draw(value_literal(depth + 1))}" for k in keys) + " }"
    n = draw(st.sampled_from([10, 63, 64, 65, 300, 1000]))
    return ("[" * n + "]" * n) if draw(st.booleans()) else ("{a=" * n + "1" + "}" * n)


def value_for(key) -> st.SearchStrategy:
    """Mostly a value of the key's own type (so the arithmetic behind it runs), sometimes anything."""
    typed = {
        "int": int_literals,
        "float": float_literals,
        "bool": st.sampled_from(["true", "false"]),
        "str": (st.sampled_from(list(key.choices)).map(toml_string) if key.choices else texts.map(toml_string)),
        "array": value_literal(),
        "table": value_literal(),
    }[key.type]
    return mostly(typed, value_literal(), 8)


# ------------------------------------------------------------------------------------------ configs

COMMENTS = st.one_of(
    st.builds(lambda k, v: f"# meshlint: {k}={v}", st.sampled_from(["world_size", "gpus_per_node", "nodes", "world"]),
              st.one_of(int_literals, st.sampled_from(["²", "٣", "", "x", "-4", "8 ignore"]))),
    st.builds(lambda n, g: f"# meshlint: nodes={n} gpus_per_node={g}", int_literals, int_literals),
    st.builds(lambda f, v: f"# torchrun --{f}={v} train.py",
              st.sampled_from(["nproc_per_node", "nnodes", "nproc-per-node"]), int_literals),
    st.builds(lambda n, g: f"# srun --nodes={n} --ntasks-per-node={g} python train.py", int_literals, int_literals),
    st.builds(lambda n, g: f"# {n} nodes x {g} H200", int_literals, int_literals),
    st.builds(lambda c: f"# meshlint: ignore[{c}]", st.sampled_from(["ML101", "ML1", "all", "", "ML9999", "x,y"])),
    st.just("# meshlint: ignore-file"),
    texts.map(lambda t: "# " + t.replace("\n", " ")),
)

DIALECT_KEYS = {"kempnerforge": kempnerforge.KEYS, "torchtitan": torchtitan.KEYS, "native": native.KEYS}


@st.composite
def section_lines(draw, keys: list, section: str) -> list[str]:
    mine = [k for k in keys if k.section == section]
    chosen = draw(st.lists(st.sampled_from(mine), max_size=len(mine), unique_by=lambda k: k.path)) if mine else []
    lines = [f"{toml_key(k.leaf)} = {draw(value_for(k))}" for k in chosen]
    for _ in range(draw(st.integers(0, 2))):  # keys the framework does not define (typos, hostile names)
        typos = [k.leaf + "s" for k in mine] + ["tp", "grad_acum_steps", "x.y.z"]
        name = draw(st.one_of(st.sampled_from(typos), texts))
        lines.append(f"{toml_key(name) if '.' not in name else name} = {draw(value_literal())}")
    if lines and draw(chance(25)):
        lines.append(lines[0])  # a duplicate key
    return lines


@st.composite
def native_mesh(draw) -> list[str]:
    dims = []
    for _ in range(draw(st.integers(0, 5))):
        name = draw(st.one_of(st.sampled_from(["pp", "dp", "dp_shard", "dp_replicate", "cp", "tp", "ep", "etp", "fsdp",
                                               "model", "x"]), texts))
        size = draw(st.one_of(st.sampled_from(["-1", "1", "2", "4", "8", "0", "-2", "3"]), int_literals,
                              value_literal()))
        role = draw(st.one_of(st.none(), st.sampled_from(["tp", "pp", "dp_shard", "nope"])))
        dims.append((name, size, role))
    lines = ["[mesh]"]
    for key in ("world_size", "gpus_per_node"):
        if draw(st.booleans()):
            lines.append(f"{key} = {draw(st.one_of(st.sampled_from(['8', '16', '64', '0']), int_literals))}")
    if draw(chance(4)):
        for name, size, role in dims:
            lines += ["[[mesh.dims]]", f"name = {toml_string(name)}", f"size = {size}"]
            if role:
                lines.append(f"role = {toml_string(role)}")
    else:
        items = [f"{{ name = {toml_string(n)}, size = {s}" + (f", role = {toml_string(r)}" if r else "") + " }"
                 for n, s, r in dims]
        if draw(chance(10)):
            items = items * draw(st.sampled_from([20, 70]))  # past the 64-dim limit
        lines.append("dims = [" + ", ".join(items) + "]")
    return lines


@st.composite
def config_text(draw) -> str:
    dialect = draw(st.sampled_from(["kempnerforge", "torchtitan", "native"]))
    lines = [draw(COMMENTS) for _ in range(draw(st.integers(0, 3)))]
    if dialect == "native":
        lines += draw(native_mesh())
    else:
        keys = DIALECT_KEYS[dialect]
        sections = list(dict.fromkeys(k.section for k in keys))
        for section in draw(st.lists(st.sampled_from(sections), min_size=1, max_size=len(sections), unique=True)):
            lines.append(f"[{section}]")
            lines += draw(section_lines(keys, section))
        if dialect == "torchtitan" and draw(st.booleans()):
            name = draw(st.sampled_from(["llama3", "deepseek_v3", "qwen3", "x"]))
            flavor = draw(st.sampled_from(["8B", "70B", "16B", "debugmodel", "?"]))
            lines += ["[model]", f"name = {toml_string(name)}", f"flavor = {toml_string(flavor)}"]
    if draw(chance(30)):  # a second dialect's section: ambiguous
        lines.append(draw(st.sampled_from(["[parallelism]", "[distributed]", "[mesh]"])))
    if draw(chance(30)):
        lines.append(".".join(["a"] * draw(st.sampled_from([10, 65, 200]))) + " = 1")
    lines += [draw(COMMENTS) for _ in range(draw(st.integers(0, 2)))]
    return "\n".join(lines) + "\n"


@st.composite
def config_bytes(draw) -> bytes:
    """A config, sometimes damaged at the byte level (truncated, a BOM, a NUL, invalid UTF-8)."""
    raw = draw(config_text()).encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(range(40)))
    if damage == 39 and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif damage == 38:
        raw = b"\xef\xbb\xbf" + raw
    elif damage == 37 and raw:
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + draw(st.sampled_from([b"\x00", b"\xff", b"\xc3", b"\x1b", b"\r"])) + raw[at:]
    elif damage == 36:
        raw += b"# " + b"a" * draw(st.sampled_from([1000, limits.MAX_LINE_CHARS + 1])) + b"\n"
    return raw


# ------------------------------------------------------------------------------------------ registries, scripts, JSON

# torchtitan 0.3.0 / main registry configs: Python functions building Trainer.Config from the generated
# schema of each version (every class and key is fuzzed the day the schema knows it), read with ``ast``
REGISTRY_SCHEMAS = {v: json.loads((ROOT / "meshlint" / "data" / "schema" / f"torchtitan-{v}.json").read_text())
                    for v in ("0.3.0", "main@b5bcd76c6")}
MODULES = ["llama3", "deepseek_v3", "qwen3", "llama4", "gpt_oss", "flux", "x", "ünïcode"]
py_ints = mostly(st.one_of(small_ints, st.sampled_from(INTERESTING_INTS).map(str)), st.sampled_from([
    "2 ** 200", "10 ** 10 ** 10", "1 << 4000", "9" * 5000, "-(2 ** 63)", "0x" + "f" * 1100, "8 // 0", "8 % 0",
    "int('8')", "len('x' * 10 ** 12)", "sum(range(10 ** 12))", "True", "None", "8.0", "'8'", "[8]"]), 8)
py_scalars = st.one_of(py_ints, py_ints, st.sampled_from(["float('nan')", "float('inf')", "1e308 * 10", "0.5", "-1.0",
                                                           "True", "False", "None", "...", "b'x'"]),
                       texts.map(repr), st.just("'x' * 10 ** 9"), st.just("f'{10 ** 10}'"))
py_exprs = st.one_of(py_scalars, py_scalars, py_scalars, st.sampled_from([
    "unknown_name", "helper()", "helper(1, k=2)", "lambda: 1", "[i for i in range(10 ** 9)]", "n * 2", "n + n",
    "(1, 2)", "[1, 2, 4]", "{'a': 1}", "{**x}", "*x", "DATASETS['c4']", "os.environ['X']", "n if n else 2",
    "model_spec", "dataclasses.replace(x)", "(" * 120 + "1" + ")" * 120, "[" * 120 + "]" * 120]))


def _typed_py(key: dict) -> st.SearchStrategy:
    kind = key["type"].get("kind")
    if kind == "literal" and key["type"].get("values"):
        return st.sampled_from(key["type"]["values"]).map(repr)
    return {"int": py_ints, "float": st.sampled_from(["0.5", "1e-4", "8.0", "-1.0", "1e400"]),
            "bool": st.sampled_from(["True", "False"]), "str": texts.map(repr)}.get(kind, py_exprs)


@st.composite
def py_call(draw, schema: dict, qn: str, depth: int = 0) -> str:
    """``ClassName(key=value, ...)`` for a schema class: mostly its own keys with values of their type."""
    cls = schema["classes"][qn]
    keys = list(cls["keys"].items())
    args = []
    for name, key in draw(st.lists(st.sampled_from(keys), max_size=5, unique_by=lambda kv: kv[0])) if keys else []:
        table = schema["tables"].get(key.get("table", "")) if "table" in key else None
        if table and depth < 3 and draw(st.booleans()):
            value = draw(py_call(schema, draw(st.sampled_from(table["classes"])), depth + 1))
        else:
            value = draw(mostly(_typed_py(key), py_exprs, 6))
        args.append(f"{name}={value}")
    if draw(chance(8)):
        args.append(f"{draw(st.sampled_from([k + 's' for k, _ in keys] or ['x']))}={draw(py_scalars)}")  # a typo
    if draw(chance(20)):
        args.append(draw(st.sampled_from(["*a", "**kw", "1", "x=1, x=2"])))
    return f"{cls['name']}({', '.join(args)})"


@st.composite
def registry_text(draw) -> str:
    schema = REGISTRY_SCHEMAS[draw(st.sampled_from(sorted(REGISTRY_SCHEMAS)))]
    root = schema["tables"][""]["default_class"]
    module = draw(st.sampled_from(MODULES))
    lines = [draw(COMMENTS) for _ in range(draw(st.integers(0, 2)))]
    lines += ["import dataclasses", "from torchtitan.trainer import Trainer",
              "from torchtitan.config import ParallelismConfig, TrainingConfig, CompileConfig",
              "from torchtitan.components.checkpointer import CheckpointManager",
              "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC",
              f"from torchtitan.models.{module} import model_registry", "", "n = " + draw(py_ints), ""]
    names = [f"cfg_{i}" for i in range(draw(st.integers(1, 3)))]
    for i, name in enumerate(names):
        flavor = draw(st.one_of(st.sampled_from(["debugmodel", "debugmodel_moe", "8B", "70B", "16B", "?"]), texts))
        call = draw(py_call(schema, root))
        spec = f"model_registry({flavor!r})"
        call = call.replace("Trainer.Config(", f"Trainer.Config(model_spec={spec}, ", 1) if draw(st.booleans()) else call
        shape = draw(st.integers(0, 9))
        body = [f"    return {call}"]
        if shape == 1 and i:  # derived from an earlier function, then edited
            body = [f"    c = {names[i - 1]}()",
                    f"    c.parallelism.tensor_parallel_degree = {draw(py_ints)}", "    return c"]
        elif shape == 2 and i:
            body = [f"    return dataclasses.replace({names[i - 1]}(), training={draw(py_call(schema, root))})"]
        elif shape == 3:
            body = [f"    return {name}()"]  # endless recursion
        elif shape == 4:
            body = ["    c = None", "    for i in range(10 ** 12):", f"        c = {call}", "    return c"]
        elif shape == 5:
            body = [f"    x = {draw(py_exprs)}", f"    y = x * {draw(py_ints)}", f"    return {call}"]
        lines += [f"def {name}() -> Trainer.Config:", *body, ""]
    text = "\n".join(lines) + "\n"
    if draw(chance(15)):  # not valid Python: cut anywhere
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def launch_text(draw) -> str:
    """A launch script: SBATCH headers, variables, torchrun/srun lines for torchtitan and KempnerForge."""
    schema = REGISTRY_SCHEMAS["main@b5bcd76c6"]
    lines = ["#!/bin/bash"]
    for flag in draw(st.lists(st.sampled_from(["nodes", "gpus-per-node", "ntasks-per-node", "gres=gpu"]), max_size=3)):
        lines.append(f"#SBATCH --{flag}={draw(py_ints)}" if "=" not in flag else f"#SBATCH --{flag}:{draw(py_ints)}")
    if draw(st.booleans()):
        lines.append(f"NGPU=${{NGPU:-{draw(py_ints)}}}")
    if draw(chance(4)):  # the script's own arguments, as a job script submitted with them reads them
        lines.append(draw(st.sampled_from(['CONFIG="${1:?usage}"\nshift', 'CONFIG=$1; shift 2', 'OVR="$@"',
                                           'set -- a b', 'shift $#'])))
    if draw(chance(5)):  # a driver line: submits another script (followed one level when it is there)
        lines.append(f"sbatch --nodes={draw(py_ints)} {draw(st.sampled_from(['train.sh', 'missing.sh', '$JOB']))} "
                     f"second1.toml --distributed.tp={draw(py_ints)}")
    for _ in range(draw(st.integers(1, 2))):
        nproc = draw(st.one_of(py_ints, st.sampled_from(["$NGPU", "${NGPU}", "$((2**200))", "'8'", "gpu"])))
        head = f"torchrun --nproc_per_node={nproc}" + (f" --nnodes={draw(py_ints)}" if draw(st.booleans()) else "")
        if draw(st.booleans()):
            overrides = []
            for table in draw(st.lists(st.sampled_from(["parallelism", "training", "checkpoint", "compile"]), max_size=2)):
                qn = schema["tables"][table]["classes"][0]
                for name, key in draw(st.lists(st.sampled_from(list(schema["classes"][qn]["keys"].items())),
                                                max_size=3, unique_by=lambda kv: kv[0])):
                    overrides.append(f"--{table}.{name} {draw(mostly(_typed_py(key), texts.map(repr), 6))}")
            sep = draw(st.sampled_from(["", "", " --", " \\\n  "]))
            lines.append(f"{head} -m torchtitan.train --module {draw(st.sampled_from(MODULES))} "
                         f"--config {draw(st.sampled_from(['llama3_debugmodel', 'llama3_8b', 'x', '']))}{sep} "
                         + " ".join(overrides))
        else:
            config = draw(st.sampled_from(["configs/train/7b.toml", "configs/train/missing.toml", "../x.toml",
                                           '"$CONFIG"', "$1", "${1}"]))
            lines.append(f"{head} scripts/train.py {config} "
                         f"--distributed.tp {draw(py_ints)} --train.seq_len {draw(py_ints)}"
                         + draw(st.sampled_from(["", " $OVR", ' "$@"', " ${@:2}"])))
    return "\n".join(lines) + "\n"


def _json_value(draw, depth: int = 0):
    kind = draw(st.integers(0, 9))
    if kind < 7 or depth > 3:
        return draw(st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(INTERESTING_INTS), texts, st.booleans(),
                              st.none(), st.floats(allow_nan=False)))
    if kind < 9:
        return [_json_value(draw, depth + 1) for _ in range(draw(st.integers(0, 3)))]
    return {draw(texts): _json_value(draw, depth + 1) for _ in range(draw(st.integers(0, 3)))}


@st.composite
def saved_json(draw) -> str:
    """A saved config (``--debug.save_config_file``): the schema's tables and keys, values of any JSON type."""
    schema = REGISTRY_SCHEMAS[draw(st.sampled_from(sorted(REGISTRY_SCHEMAS)))]
    doc = {}
    for table in draw(st.lists(st.sampled_from(["parallelism", "training", "model_spec", "checkpoint", "debug"]),
                               max_size=4, unique=True)):
        entry = schema["tables"].get(table)
        keys = list(schema["classes"][entry["classes"][0]]["keys"]) if entry else ["name", "flavor"]
        doc[table] = {draw(st.sampled_from(keys)): _json_value(draw) for _ in range(draw(st.integers(0, 4)))}
    text = json.dumps(doc)
    if draw(chance(10)):
        text = "[" * 100 + text + "]" * draw(st.sampled_from([0, 100]))
    return text


def _framework_facts() -> tuple:
    """Accelerate's config keys and launch flags, Megatron-LM's options: from the generated facts, so a key the
    release adds is fuzzed the day its facts are regenerated."""
    import tomllib

    pkg = ROOT / "meshlint" / "frameworks"
    acc = tomllib.loads((pkg / "accelerate" / "facts-1.15.0.toml").read_text())
    meg = json.loads((pkg / "megatron" / "flags_core_0_16.json").read_text())
    return sorted(acc["config_keys"]), sorted(acc["flags"]), sorted(meg["flags"]), sorted(meg["entries"])


ACC_KEYS, ACC_FLAGS, MEG_FLAGS, MEG_ENTRIES = _framework_facts()
PARALLELISM_KEYS = ["parallelism_config_dp_replicate_size", "parallelism_config_dp_shard_size",
                    "parallelism_config_tp_size", "parallelism_config_cp_size", "parallelism_config_sp_size",
                    "parallelism_config_cp_backend", "parallelism_config_sp_backend", "parallelism_config_x"]
MEG_DEGREES = ["--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
               "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-layers", "--hidden-size",
               "--num-attention-heads", "--num-query-groups", "--micro-batch-size", "--global-batch-size",
               "--num-layers-per-virtual-pipeline-stage", "--decoder-first-pipeline-num-layers", "--num-experts"]
YAML_SCALARS = st.one_of(
    py_ints.map(str), st.sampled_from(["NO", "FSDP", "MULTI_GPU", "DEEPSPEED", "yes", "~", "null", "true", "1e400",
                                       "0x10", "!!python/object:os.system ls", "!!binary aGk=", "*nowhere", "&a 1",
                                       "'4'", '"\\x1b[2J"', "[1, [2, [3]]]", "{a: 1}", "- x", "<<: *a", "?"]),
    texts.map(lambda t: json.dumps(t)),
)


@st.composite
def accelerate_yaml(draw) -> str:
    """An `accelerate config` file: the release's keys, a parallelism_config section, hostile YAML mixed in
    (tags that would build objects, aliases, merge keys, deep nesting, several documents, tabs)."""
    lines = []
    for key in draw(st.lists(st.sampled_from(ACC_KEYS + ["num_processes", "distributed_type", "bogus_key"]),
                             max_size=6)):
        lines.append(f"{key}: {draw(YAML_SCALARS)}")
    if draw(st.booleans()):
        lines.append("parallelism_config:")
        for key in draw(st.lists(st.sampled_from(PARALLELISM_KEYS), max_size=5)):
            lines.append(f"  {key}: {draw(YAML_SCALARS)}")
    if draw(st.booleans()):
        lines.append("fsdp_config:\n  fsdp_version: " + draw(YAML_SCALARS))
    if draw(chance(8)):
        depth = draw(st.integers(50, 400))
        lines.append("deep: " + "[" * depth + "]" * depth)
    if draw(chance(8)):
        lines.append("a: &x [1, 2]\nb: [*x, *x, *x, *x]\nc: [*b, *b, *b]")
    if draw(chance(10)):
        lines.append("---\nnum_processes: 2")
    if draw(chance(10)):
        lines.append("\tnum_machines: 2")
    return "\n".join(lines) + "\n"


@st.composite
def framework_script(draw) -> str:
    """A launch script for Accelerate or Megatron-LM: `accelerate launch` flags and config files, bash arrays of
    Megatron options expanded on a torchrun line, exported PARALLELISM_CONFIG_* variables."""
    lines = ["#!/bin/bash"]
    if draw(st.booleans()):  # Accelerate
        for var in draw(st.lists(st.sampled_from(["DP_SHARD_SIZE", "TP_SIZE", "CP_SIZE", "DP_REPLICATE_SIZE"]),
                                 max_size=2)):
            lines.append(f"export PARALLELISM_CONFIG_{var}={draw(st.one_of(py_ints.map(str), st.just('$X')))}")
        flags = []
        for flag in draw(st.lists(st.sampled_from(ACC_FLAGS + PARALLELISM_KEYS), max_size=5)):
            value = draw(st.one_of(py_ints.map(str), st.sampled_from(["", "x", "$N", '""'])))
            flags.append(f"--{flag} {value}")
        lines.append("accelerate launch " + " ".join(flags) + f" {draw(st.sampled_from(['train.py', '-m mod', '']))}")
        return "\n".join(lines) + "\n"
    items = [f"{flag} {draw(st.one_of(py_ints.map(str), st.sampled_from(['$TP', '${X:-2}', 'x', ''])))}"
             for flag in draw(st.lists(st.sampled_from(MEG_DEGREES + MEG_FLAGS[:40]), max_size=8))]
    lines.append(f"TP={draw(py_ints)}")
    lines.append("MODEL_ARGS=(\n    " + "\n    ".join(items) + "\n)")
    if draw(st.booleans()):
        lines.append(f"MODEL_ARGS+=({draw(st.sampled_from(MEG_DEGREES))} {draw(py_ints)})")
    if draw(chance(6)):
        lines.append("if [ \"$X\" = 1 ]; then MODEL_ARGS+=(--num-layers 7); fi")
    nproc = draw(st.one_of(py_ints.map(str), st.sampled_from(["$GPUS", "8"])))
    lines.append(f"torchrun --nproc_per_node {nproc} --nnodes {draw(py_ints)} "
                 f"{draw(st.sampled_from(MEG_ENTRIES + ['pretrain_x.py']))} "
                 + draw(st.sampled_from(['${MODEL_ARGS[@]}', '"${MODEL_ARGS[@]}"', '${MODEL_ARGS[*]}', '$MODEL_ARGS'])))
    return "\n".join(lines) + "\n"


@st.composite
def other_input(draw) -> tuple:
    """(file name, bytes) of a registry, a launch script (torchtitan, KempnerForge, Accelerate, Megatron-LM),
    a saved config or an Accelerate config file."""
    kind = draw(st.sampled_from(["registry", "registry", "script", "saved", "yaml", "framework_script"]))
    if kind == "yaml":
        return draw(st.sampled_from(["accelerate.yaml", "cfg.yml", "evil\x1b[2J.yaml"])), \
            draw(accelerate_yaml()).encode("utf-8", "surrogatepass")
    if kind == "framework_script":
        return draw(st.sampled_from(["launch.sh", "pretrain.sbatch"])), \
            draw(framework_script()).encode("utf-8", "surrogatepass")
    if kind == "registry":
        return draw(st.sampled_from(["config_registry.py", "my configs.py", "evil\x1b[2J.py"])), \
            draw(registry_text()).encode("utf-8", "surrogatepass")
    if kind == "script":
        return draw(st.sampled_from(["train.sh", "job.sbatch", "run.slurm"])), \
            draw(launch_text()).encode("utf-8", "surrogatepass")
    return "saved_config.json", draw(saved_json()).encode("utf-8", "surrogatepass")


FILE_NAMES = st.one_of(
    st.just("config.toml"),
    st.builds(lambda n: f"model_{n}gpu_tp4.toml", st.sampled_from(["8", "32", "0", "16777217", "9" * 40, "²"])),
    st.sampled_from(["evil\x1b[2J.toml", "bidi\u202e.toml", "a b.toml", "-x.toml"]),
)


# ------------------------------------------------------------------------------------------ rule packs

FACTS = sorted(FACT_DOCS)
FIELD_READS = [f"{root}.{field}" for root, fields in GROUP_FIELDS.items() for field in fields]
HOSTILE_EXPRS = st.one_of(
    st.sampled_from([
        "2.0 ** 5000.5", "10.0 ** 400", "(-8) ** 0.5", "round(1, -1000000000)", "percent(0.5, 1000000000)",
        "percent(0.5, 2147483648)", "divisors(2 ** 63)", "range(100000) + range(100000)",
        "len([x for a in range(100000) for x in range(100000)])", "str(range(100000))", "sorted([[1], [2]])",
        "int('9' * 5)", "'a' * 3", "[1] in {}", "1 / 0", "1 % 0", "0.0 ** -1", "int(1e308 * 10)",
        "join([str(x) for x in range(30000)])", "params.deep == params.deep", "str(params.deep)", "params.big * 2",
        "percent(params.big)", "round(params.big, 3)", "world_size // 0", "keys(params) + keys(params)",
    ]),
    st.integers(40, 1500).map(lambda n: "+".join(["1"] * n)),
    st.integers(40, 1500).map(lambda n: "[1]" + "[0]" * n),
    st.integers(30, 300).map(lambda n: "(" * n + "1" + ")" * n),
    st.integers(30, 300).map(lambda n: "not " * n + "true"),
)
atoms = st.one_of(
    st.sampled_from(FACTS), st.sampled_from(FIELD_READS),
    st.sampled_from(["1", "0", "-1", "2", "1.5", "'tp'", "''", "true", "false", "null", "[]", "[1, 2, 3]",
                     "params.n", "params.s", "params.deep", "params.big", "9" * 80, "2 ** 256"]),
    texts.map(lambda t: "'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'"),
)


def _extend(children):
    fn_names = sorted(FUNCTIONS)
    return st.one_of(
        st.builds(lambda a, op, b: f"({a} {op} {b})", children,
                  st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", "in", "not in", "and",
                                   "or"]), children),
        st.builds(lambda f, args: f"{f}({', '.join(args)})", st.sampled_from(fn_names), st.lists(children, max_size=3)),
        st.builds(lambda a: f"not {a}", children),
        st.builds(lambda a: f"-{a}", children),
        st.builds(lambda a, b, c: f"({a} if {b} else {c})", children, children, children),
        st.builds(lambda a, b: f"[{a} for x in {b}]", children, children),
        st.builds(lambda a, b: f"{a}[{b}]", children, children),
        st.builds(lambda a: f"{a}.name", children),
        st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    )


expressions = mostly(st.recursive(atoms, _extend, max_leaves=12), HOSTILE_EXPRS, 6)


@st.composite
def rule_file(draw, index: int) -> str:
    lines = [f'code = "ZZ{index:03d}"', f'name = "fuzz-rule-{index}"',
             f"severity = {toml_string(draw(flag_value(['error', 'warning', 'info'], ['fatal'])))}",
             'summary = "a fuzzed rule"', f"check = {toml_string(draw(expressions))}"]
    holes = draw(st.lists(expressions, max_size=3))
    tail = draw(flag_value(["", "{{literal}}"], ["{", "}", "{1 +}"]))
    message = "m " + "".join(f"text {{{h}}} " for h in holes) + tail
    if draw(chance(10)):
        message = "{str(range(90000))}" * 50  # a template bomb
    lines.append(f"message = {toml_string(message)}")
    if draw(st.booleans()):
        lines.append(f"when = {toml_string(draw(expressions))}")
    if draw(chance(4)):
        foreach = draw(st.sampled_from(["axes", "problems", "degree_values", "range(5)", "params.list", "world_size"]))
        key = draw(st.sampled_from(["{item.key}", "{item}", "#L3", "#L²", "distributed.tp"]))
        lines += [f"foreach = {toml_string(foreach)}", f"key = {toml_string(key)}"]
    if draw(chance(3)):
        lines.append(f"dialects = [{toml_string(draw(flag_value(['kempnerforge', 'torchtitan', 'native'], ['x'])))}]")
    lets = draw(st.lists(expressions, max_size=3))
    for i, e in enumerate(lets):
        lines.append(f"let.l{i} = {toml_string(e)}")
    if draw(chance(8)):  # a long let chain
        n = draw(st.sampled_from([8, 9, 300]))
        lines += ['let.c0 = "1"'] + [f'let.c{i} = "c{i - 1} + 1"' for i in range(1, n)]
    deep = draw(st.sampled_from([1, 5, 40, 63]))
    lines.append("params.deep = " + "[" * deep + "]" * deep)
    lines.append(f"params.big = {draw(st.sampled_from(['1', '9' * 30, '9' * 400]))}")
    lines.append("params.n = 3\nparams.s = 'x'\nparams.list = [1, 2, 3]")
    if draw(chance(5)):
        lines.append(f"help = {toml_string(draw(expressions).join(['use {', '}']))}")
    return "\n".join(lines) + "\n"


@st.composite
def rule_pack(draw) -> dict[str, str]:
    return {f"r{i}.toml": draw(rule_file(i)) for i in range(draw(st.integers(1, 3)))}


# ------------------------------------------------------------------------------------------ command lines

class Case(NamedTuple):
    """One fuzz input: files to write, then a command line over them (``{0}`` = the first file, ...)."""

    files: tuple              # ((name, bytes), ...)
    pack: tuple               # ((name, text), ...) of a rule pack, empty for none
    argv: tuple               # with {f0}, {f1}, {dir}, {pack}, {fifo}, {missing}, {out} placeholders
    command: str


TOPOLOGY_VALUES = mostly(st.sampled_from(["1", "2", "4", "8", "16", "32", "64", "3", "6", "16777216", "16777215"]),
                         st.sampled_from(["0", "-1", "16777217", "abc", "", "1e3", "9" * 50]))


def flag_value(valid: list, invalid: list) -> st.SearchStrategy:
    return mostly(st.sampled_from(valid), st.sampled_from(invalid), 12)


@st.composite
def topology_flags(draw) -> list[str]:
    shape = draw(mostly(st.sampled_from([(), ("--world-size",), ("--gpus-per-node",),
                                         ("--world-size", "--gpus-per-node"), ("--nodes", "--gpus-per-node")]),
                        st.sampled_from([("--nodes",), ("--world-size", "--nodes", "--gpus-per-node")]), 15))
    out = []
    for flag in shape:
        out += [flag, draw(TOPOLOGY_VALUES)]
    if draw(chance(4)):
        out += ["--placement", draw(flag_value(["block", "cyclic"], ["round-robin"]))]
    if draw(chance(6)):
        out += ["--dialect", draw(flag_value(["kempnerforge", "torchtitan", "native"], ["other"]))]
    return out


@st.composite
def cases(draw) -> Case:
    command = draw(st.sampled_from(["check", "check", "check", "explain", "explain", "diff", "rules"]))
    files = tuple((draw(FILE_NAMES) if i == 0 else f"second{i}.toml", draw(config_bytes()))
                  for i in range(draw(st.integers(1, 2))))
    if draw(chance(3)):  # a registry, a launch script or a saved config in first place
        files = (draw(other_input()),) + files[1:]
    pack = tuple(draw(rule_pack()).items()) if draw(chance(6)) or command == "rules" else ()
    target = draw(mostly(st.sampled_from(["{f0}", "{f0}", "{f0}", "{dir}"]), st.sampled_from(["{fifo}", "{missing}",
                                                                                            "/dev/null"]), 8))
    argv: list[str] = [command]
    if command == "check":
        submit = draw(chance(6))  # the first file run as a job script: sbatch [opts] SCRIPT CONFIG OVERRIDES
        argv += [] if submit else [target] + (["{f1}"] if len(files) > 1 else [])
        argv += draw(topology_flags())
        if draw(st.booleans()):
            argv += ["--format", draw(flag_value(["text", "json", "sarif", "github"], ["yaml"]))]
        for flag, values, invalid in (("--fail-on", ["error", "warning", "info", "never"], ["fatal"]),
                                      ("--select", ["ML1", "ML101,ML2", "ML3"], ["bogus", "ZZ", "ML"]),
                                      ("--ignore", ["ML105", "ML1"], ["x"]),
                                      ("--extend-select", ["ML9", "ML901"], ["?"]),
                                      ("--gpu-memory-gib", ["80", "0.5", "141", "1e3"], ["nan", "-1", "1e9"]),
                                      ("--color", ["auto", "always", "never"], ["rainbow"])):
            if draw(chance(5)):
                argv += [flag, draw(flag_value(values, invalid))]
        if draw(chance(5)):
            argv += ["--torchtitan-version", draw(flag_value(["0.3.0", "main", "0.2.2", "b5bcd76c6"], ["9.9", "", "²"]))]
        for flag in ("-q", "--report-unused-suppressions", "--isolated"):
            if draw(chance(4)):
                argv.append(flag)
        if pack:
            argv += ["--rules", "{pack}"]
        if submit:
            argv += ["--", draw(st.sampled_from(["sbatch", "bash", "sh"]))]
            argv += draw(st.lists(st.sampled_from(["--nodes=2", "-N", "4", "--gpus-per-node=8", "--ntasks-per-node=x",
                                                   "--nodes", "--"]), max_size=3))
            argv += [target, "{f1}"] + draw(st.lists(st.sampled_from(
                ["--distributed.tp=2", "--distributed.tp", "8", "--train.seq_len=x", "$X", "--parallelism.x=1"]),
                max_size=3))
    elif command == "explain":
        several = len(files) > 1 and draw(st.booleans())
        argv += [target] + (["{f1}"] if several else [])
        argv += draw(topology_flags())
        if draw(st.booleans()):
            argv += ["--format", draw(st.sampled_from(["text", "json"]))]
        for _ in range(draw(st.integers(0, 2))):
            argv += ["--rank", draw(flag_value(["0", "1", "7", "3"], ["16777215", "-1", "99999999999999999999"]))]
        if draw(chance(4)):
            argv += ["--coords", draw(flag_value(["tp=1,pp=0", "tp=0", "dp_shard=1"],
                                                 ["x", "dp_shard=99999999999", "tp=-1", "tp=1,tp=2", "tp=²"]))]
        if not several and draw(chance(6)):  # --svg draws one config
            argv += ["--svg", "{out}"]
    elif command == "diff":
        argv += [target, "{f1}" if len(files) > 1 else "{f0}"]
        argv += draw(topology_flags())
        for _ in range(draw(st.integers(0, 2))):
            argv += ["--rank", draw(flag_value(["0", "3", "5"], ["16777215", "99999999999999999999"]))]
        if draw(st.booleans()):
            argv += ["--format", draw(st.sampled_from(["text", "json"]))]
    else:
        argv += ["--rules", draw(flag_value(["{pack}"], ["{f0}", "{missing}", "{fifo}"]))]
        if draw(st.booleans()):
            argv += ["--format", draw(st.sampled_from(["text", "json", "markdown"]))]
    return Case(files, pack, tuple(argv), command)


# ------------------------------------------------------------------------------------------ the oracle

EXIT_CODES = {"check": {0, 1, 2}, "explain": {0, 2}, "diff": {0, 1, 2}, "rules": {0, 2}}
_OUR_SGR = re.compile(r"\x1b\[[0-9;]*m")
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Result(NamedTuple):
    problems: list        # what the oracle found wrong (empty: a pass)
    seconds: float        # wall time
    exit_code: int | None
    rule_errors: int      # "rule could not be evaluated" findings (a hostile rule, reported, not a failure)
    cpu_seconds: float = 0.0  # CPU time: the work itself, whatever else the machine runs


def materialise(case: Case, base: Path) -> list[str]:
    """Write the case's files under ``base`` and return its argv with the placeholders filled."""
    configs = base / "configs"
    configs.mkdir(parents=True)
    paths = []
    for i, (name, raw) in enumerate(case.files):
        path = configs / (name if i == 0 else f"second{i}.toml")
        path.write_bytes(raw)
        paths.append(str(path))
    pack = base / "pack"
    pack.mkdir()
    for name, text in case.pack:
        (pack / name).write_text(text)
    fifo = base / "pipe.toml"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
    names = {"f0": paths[0], "f1": paths[-1], "dir": str(configs), "pack": str(pack), "fifo": str(fifo),
             "missing": str(base / "missing.toml"), "out": str(base / "out.svg")}
    return [a.format(**names) if a.startswith("{") and a.endswith("}") and a[1:-1] in names else a
            for a in case.argv]


def run_case(case: Case, base_dir: str | None = None) -> Result:
    from click.testing import CliRunner

    from meshlint.cli.commands import main

    base = Path(tempfile.mkdtemp(prefix="fuzz-", dir=base_dir))
    try:
        argv = materialise(case, base)
        start, cpu = time.perf_counter(), time.process_time()
        result = CliRunner().invoke(main, argv, catch_exceptions=True)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return Result(check_result(case, argv, result), seconds, result.exit_code,
                  result.stdout.count("rule could not be evaluated"), cpu)


def check_result(case: Case, argv: list, result) -> list[str]:
    problems = []
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-1500:]
        problems.append(f"traceback: {type(exc).__name__}: {exc}\n{tb}")
        return problems
    if result.exit_code not in EXIT_CODES[case.command]:
        problems.append(f"exit code {result.exit_code} not in {sorted(EXIT_CODES[case.command])}")
    out, err = result.stdout, result.stderr
    if "Traceback (most recent call last)" in out + err:
        problems.append("a traceback in the output")
    fmt = argv[argv.index("--format") + 1] if "--format" in argv else "text"
    if result.exit_code in (0, 1) or (fmt in ("json", "sarif") and out.lstrip().startswith("{")):
        if fmt in ("json", "sarif") and case.command != "rules":
            try:
                doc = json.loads(out)
            except ValueError as e:
                problems.append(f"--format {fmt}: not JSON ({e})")
            else:
                if case.command == "check" and fmt == "json":
                    import jsonschema

                    try:
                        jsonschema.validate(doc, SCHEMA)
                    except jsonschema.ValidationError as e:
                        problems.append(f"JSON report not schema-valid: {e.message[:300]} at {list(e.absolute_path)}")
        if fmt == "github":  # the runner splits its output on CR and LF only (both escaped as %0D, %0A)
            bad = [line for line in re.split("\r\n|\r|\n", out) if line and not line.startswith("::")]
            if bad:
                problems.append(f"--format github: a line that is not a workflow command: {bad[0][:120]!r}")
    if fmt in ("text",):
        stray = _RAW_CONTROL.search(_OUR_SGR.sub("", out + err))
        if stray:
            problems.append(f"raw control character {stray.group()!r} on the terminal")
    return problems


def describe(case: Case) -> str:
    files = "; ".join(f"{name!r}: {raw[:300]!r}{'...' if len(raw) > 300 else ''}" for name, raw in case.files)
    pack = "; ".join(f"{n}: {t[:300]!r}" for n, t in case.pack)
    return f"argv={list(case.argv)}\nfiles: {files}" + (f"\npack: {pack}" if pack else "")
