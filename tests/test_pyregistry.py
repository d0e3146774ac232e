"""The static reader of torchtitan's Python config registries (meshlint.inputs.pyregistry).

Three parts: the hand-written miniature checkout under fixtures/torchtitan_registry
(every pattern the reader follows, positions, comments, lookups); hostile inputs
(never a traceback: an InputError or an Unknown); and torchtitan's real registries
at b5bcd76c6 (counts, hand-checked values and positions, graph_trainer's reflection),
skipped with a reason where ../shared is absent.
"""

from __future__ import annotations

import ast
import glob
import io
import os
import time
import tokenize
from pathlib import Path

import pytest

from meshlint.errors import InputError
from meshlint.inputs import pyregistry
from meshlint.inputs.pyregistry import find_config_module, read_function, read_registry
from meshlint.inputs.pysource import PySource, Unknown

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "torchtitan_registry"
TINY = FIX / "torchtitan" / "models" / "tiny" / "config_registry.py"
RECIPES = FIX / "recipes" / "derived.py"
TOY_RL = FIX / "torchtitan" / "experiments" / "rl" / "examples" / "toy" / "config_registry.py"
SHARED = Path(__file__).resolve().parents[2] / "shared"
TT = SHARED / "frameworks" / "torchtitan-b5bcd76c6"
needs_tt = pytest.mark.skipif(not TT.is_dir(), reason=f"{TT} is absent (torchtitan main checkout)")


def _line(path: Path, n: int) -> str:
    return path.read_text().splitlines()[n - 1]


@pytest.fixture(scope="module")
def tiny():
    rf = read_registry(str(TINY))
    assert rf.error is None
    return rf


# -----------------------------------------------------------------------------
# The miniature checkout
# -----------------------------------------------------------------------------
def test_functions_found_in_file_order_and_skipped_with_reasons(tiny):
    assert list(tiny.functions) == ["tiny_debug", "tiny_tp4", "tiny_big", "tiny_replaced", "tiny_unknown_tp",
                                    "tiny_loop", "tiny_reflection", "tiny_whole_unknown"]
    skipped = dict(tiny.skipped)
    assert set(skipped) == {"_private_helper", "build", "not_a_config"}
    assert "private" in skipped["_private_helper"]
    assert "argument" in skipped["build"]
    assert "int" in skipped["not_a_config"]
    assert all(isinstance(s, PySource) for s in tiny.functions.values())


def test_literals_arithmetic_fstrings_model_registry(tiny):
    src = tiny.functions["tiny_debug"]
    assert src.data["training"] == {"num_tokens_per_microbatch_per_dp_rank": 16384, "max_context_length": 2048,
                                    "steps": 10}
    assert src.data["parallelism"] == {"tensor_parallel_degree": 2, "pipeline_parallel_schedule": "Interleaved1F1B"}
    assert src.data["model"] == {"name": "tiny", "flavor": "debugmodel"}
    assert src.data["dump_folder"] == "./outputs/tiny"
    assert src.unknown == {}
    assert src.model_module == "torchtitan.models.tiny"
    assert src.types["parallelism"] == "ParallelismConfig" and src.types[""] == "Trainer.Config"
    assert src.path == f"{TINY}::tiny_debug" and src.file == str(TINY) and src.function == "tiny_debug"
    assert src.name == "config_registry.py" and src.nested_under is None


def test_positions_point_at_the_keyword_the_flavor_and_the_def(tiny):
    src = tiny.functions["tiny_debug"]
    line, col = src.locate("parallelism.tensor_parallel_degree")
    assert _line(TINY, line)[col - 1:].startswith("tensor_parallel_degree=2")
    line, col = src.locate("model.flavor")
    assert _line(TINY, line)[col - 1:].startswith('"debugmodel"')
    line, col = src.locate("training.num_tokens_per_microbatch_per_dp_rank")
    assert _line(TINY, line)[col - 1:].startswith("num_tokens_per_microbatch_per_dp_rank=8 * SEQ_LEN")
    # defaulted: the enclosing sub-config that is set, else the def
    assert src.locate("parallelism.pipeline_parallel_degree") == src.locate("parallelism")
    assert _line(TINY, src.locate("parallelism")[0]).strip().startswith("parallelism=ParallelismConfig(")
    assert src.locate("comm.mode") == (src.def_line, src.def_col)
    assert _line(TINY, src.def_line)[src.def_col - 1:].startswith("def tiny_debug")
    # the Source.locate contract: alternatives and line references
    assert src.locate("parallelism.context_parallel_degree|parallelism.tensor_parallel_degree") == \
        src.locate("parallelism.tensor_parallel_degree")
    assert src.locate("#L7") == (7, 1)
    assert src.has_key("parallelism.tensor_parallel_degree") and not src.has_key("parallelism.pp")
    assert src.unknown_of("parallelism.pipeline_parallel_degree") is None   # defaulted, not unknown


def test_pysource_duck_types_source_and_follows_later_edits(tiny):
    import copy

    from meshlint.inputs.source import Source

    src = read_registry(str(TINY)).functions["tiny_tp4"]
    for attr in ("path", "text", "data", "name", "comments"):
        assert hasattr(src, attr)
    for method in ("locate", "has_key"):
        assert callable(getattr(src, method)) and callable(getattr(Source, method))
    # a launch override replaces data after reading: lookups see the new data
    assert not src.has_key("parallelism.context_parallel_degree")
    src.data = copy.deepcopy(src.data)
    src.data["parallelism"]["context_parallel_degree"] = 2
    assert src.has_key("parallelism.context_parallel_degree")
    src.unknown = {"parallelism.expert_parallel_degree": Unknown("set by $EP", 1, 1, "run.sh")}
    assert src.unknown_of("parallelism.expert_parallel_degree").file == "run.sh"
    assert src.unknown_of("parallelism.context_parallel_degree") is None


def test_derivation_copies_values_and_points_at_the_call(tiny):
    src = tiny.functions["tiny_tp4"]
    assert src.data["parallelism"]["tensor_parallel_degree"] == 4
    assert src.data["training"]["steps"] == 15                          # augmented assignment
    assert src.data["model"] == {"name": "tiny", "flavor": "debugmodel"}
    call = src.locate("training.max_context_length")                    # set by tiny_debug()
    assert "config = tiny_debug()" in _line(TINY, call[0])
    assert _line(TINY, call[0])[call[1] - 1:].startswith("tiny_debug()")
    assert "tensor_parallel_degree = 4" in _line(TINY, src.locate("parallelism.tensor_parallel_degree")[0])
    assert "steps += 5" in _line(TINY, src.locate("training.steps")[0])
    assert src.derived_from and src.derived_from[0][0].endswith("::tiny_debug")


def test_helpers_and_constants_of_another_module(tiny):
    src = tiny.functions["tiny_big"]
    assert src.data["parallelism"] == {"tensor_parallel_degree": 8, "data_parallel_shard_degree": -1,
                                       "pipeline_parallel_degree": 4}
    assert src.data["training"] == {"num_tokens_per_microbatch_per_dp_rank": 8192, "disable_cuda_graphs": True}
    assert src.data["model"] == {"name": "tiny", "flavor": "70B", "attn_backend": "varlen"}
    # what the helper sets points at the helper's call in this function
    assert "enable_pp(config" in _line(TINY, src.locate("parallelism.pipeline_parallel_degree")[0])
    assert src.unknown == {}


def test_dataclasses_replace_loops_and_literal_conditions(tiny):
    src = tiny.functions["tiny_replaced"]
    assert src.data["parallelism"]["context_parallel_degree"] == 2
    assert src.data["parallelism"]["tensor_parallel_degree"] == 2                 # kept by replace
    assert src.data["compile"] == {"enable": True, "components": ["model"]}
    loop = tiny.functions["tiny_loop"]
    assert loop.data["parallelism"]["expert_parallel_degree"] == 4              # unrolled: the last wins
    assert loop.data["training"]["max_context_length"] == 4096                  # if on a literal
    assert loop.unknown == {}


def test_unknowns_cover_exactly_what_could_not_be_followed(tiny):
    src = tiny.functions["tiny_unknown_tp"]
    u = src.unknown_of("parallelism.tensor_parallel_degree")
    assert isinstance(u, Unknown) and "environment" in u.reason
    assert "os.environ" in _line(TINY, u.line)
    assert src.unknown_of("parallelism.pipeline_parallel_schedule") is None    # the rest is known
    assert src.data["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert not src.has_key("parallelism.tensor_parallel_degree")

    refl = tiny.functions["tiny_reflection"]
    assert refl.data == {}
    assert "reflection" in refl.unknown["parallelism"].reason and "getattr" in refl.unknown["parallelism"].reason
    assert refl.unknown_of("parallelism.tensor_parallel_degree") is refl.unknown["parallelism"]

    whole = tiny.functions["tiny_whole_unknown"]
    assert whole.data == {} and set(whole.unknown) == {""}
    assert "load_from_somewhere" in whole.unknown[""].reason
    assert whole.unknown_of("parallelism.tensor_parallel_degree") is whole.unknown[""]
    assert whole.locate("parallelism.tensor_parallel_degree")[0] == whole.unknown[""].line


def test_comments_of_the_function_and_module_level_directives(tiny):
    src = tiny.functions["tiny_debug"]
    texts = [c[2] for c in src.comments]
    assert " meshlint: ignore[ML201]" in texts
    assert " meshlint: ignore-file[ML999]" in texts          # module level, kept because it says meshlint:
    line, col, _ = next(c for c in src.comments if "ML201" in c[2])
    assert _line(TINY, line)[col - 1] == "#"
    assert line == src.locate("parallelism.tensor_parallel_degree")[0]
    assert not any("ML201" in c[2] for c in tiny.functions["tiny_tp4"].comments)


def test_derivation_across_modules_and_local_imports():
    rf = read_registry(str(RECIPES))
    assert rf.error is None and list(rf.functions) == ["recipe_pp2", "recipe_local_import", "recipe_plain"]
    pp2 = rf.functions["recipe_pp2"]
    assert pp2.data["parallelism"] == {"tensor_parallel_degree": 4, "pipeline_parallel_schedule": "Interleaved1F1B",
                                       "pipeline_parallel_degree": 2}
    assert "tiny_tp4()" in _line(RECIPES, pp2.locate("parallelism.tensor_parallel_degree")[0])
    local = rf.functions["recipe_local_import"]
    assert local.data["parallelism"]["tensor_parallel_degree"] == 4                 # 8 // 2
    assert local.data["model"]["flavor"] == "70B"
    # no annotation: a config function because it returns one
    assert rf.functions["recipe_plain"].data["model"]["flavor"] == "debugmodel"


def test_rl_configs_are_normalised_to_the_trainer():
    rf = read_registry(str(TOY_RL))
    src = rf.functions["rl_toy"]
    assert src.nested_under == "trainer"
    assert src.data["parallelism"] == {"data_parallel_shard_degree": 1, "tensor_parallel_degree": 2}
    assert src.data["model"] == {"name": "tiny", "flavor": "0.6B", "attn_backend": "varlen"}
    line, col = src.locate("parallelism.tensor_parallel_degree")
    assert _line(TOY_RL, line)[col - 1:].startswith("tensor_parallel_degree=2")
    # the controller's __post_init__ writes the trainer's token counts; without its class they are unknown
    assert "__post_init__" in src.unknown["training"].reason
    no_sp = rf.functions["rl_toy_no_sp"]
    assert no_sp.data["parallelism"]["enable_sequence_parallel"] is False
    assert no_sp.data["parallelism"]["tensor_parallel_degree"] == 2


def test_read_function_and_its_errors():
    src = read_function(str(TINY), "tiny_tp4")
    assert src.data["parallelism"]["tensor_parallel_degree"] == 4
    # torchtitan can call a private function by name: allowed when it returns a config
    assert read_function(str(TINY), "_private_helper").data["model"]["flavor"] == "debugmodel"
    # a function the module imports is read where it is defined
    imported = read_function(str(RECIPES), "tiny_debug")
    assert imported.file.endswith("config_registry.py") and imported.function == "tiny_debug"
    with pytest.raises(InputError) as exc:
        read_function(str(TINY), "tiny_tp5")
    assert exc.value.code == "ML006" and "tiny_tp4" in (exc.value.help or "")
    assert "tiny_debug" in exc.value.message
    with pytest.raises(InputError) as exc:
        read_function(str(TINY), "not_a_config")
    assert exc.value.code == "ML006"
    with pytest.raises(InputError) as exc:
        read_function(str(TINY), "build")
    assert exc.value.code == "ML006" and "arguments" in exc.value.message


def test_find_config_module_like_torchtitan():
    path, fn = find_config_module(str(FIX), "tiny", "tiny_tp4")
    assert Path(path) == TINY and fn == "tiny_tp4"
    path, fn = find_config_module(str(FIX), "toy", "rl_toy")               # experiments/rl/examples/<m>
    assert Path(path) == TOY_RL
    path, fn = find_config_module(str(FIX), "recipes.derived", "recipe_pp2")   # a dotted module
    assert Path(path) == RECIPES
    path, fn = find_config_module(str(FIX), "recipes.derived", "tiny_tp4")     # imported: where it is defined
    assert Path(path) == TINY and fn == "tiny_tp4"
    with pytest.raises(InputError):       # imported only inside a function: torchtitan cannot see it either
        find_config_module(str(FIX), "recipes.derived", "tiny_big")
    with pytest.raises(InputError) as exc:
        find_config_module(str(FIX), "tinny", "tiny_tp4")
    assert exc.value.code == "ML006" and "tiny" in (exc.value.help or "")
    with pytest.raises(InputError) as exc:
        find_config_module(str(FIX), "tiny", "tiny_tp3")
    assert exc.value.code == "ML006" and "tiny_tp4" in (exc.value.help or "")


def test_root_is_inferred_from_the_packages():
    assert pyregistry.infer_root(str(TINY)) == str(FIX)
    assert read_registry(str(TINY)).root == str(FIX)
    # text given in memory, read with an explicit root
    rf = read_registry("memory.py", text=TINY.read_text().replace("tiny_debug", "tiny_dbg"), root=str(FIX))
    assert "tiny_dbg" in rf.functions


def test_a_registry_outside_the_checkout_finds_it_on_the_search_path(tmp_path):
    user = tmp_path / "my_registry.py"
    user.write_text("from torchtitan.models.tiny.config_registry import tiny_tp4\n"
                    "from torchtitan.trainer import Trainer\n\n"
                    "def mine() -> Trainer.Config:\n    config = tiny_tp4()\n"
                    "    config.parallelism.pipeline_parallel_degree = 2\n    return config\n")
    alone = read_registry(str(user)).functions["mine"]
    assert set(alone.unknown) == {""} and "outside the checkout" in alone.unknown[""].reason
    found = read_registry(str(user), search_path=[str(FIX)]).functions["mine"]
    assert found.unknown == {}
    assert found.data["parallelism"]["tensor_parallel_degree"] == 4
    assert found.data["parallelism"]["pipeline_parallel_degree"] == 2
    assert "tiny_tp4()" in user.read_text().splitlines()[found.locate("parallelism.tensor_parallel_degree")[0] - 1]
    # --torchtitan-root given as root for a file outside it: searched after the file's own package
    rooted = read_registry(str(user), root=str(FIX))
    assert rooted.functions["mine"].unknown == {} and rooted.root == str(tmp_path)


def test_conditions_on_unknowns_make_what_they_set_unknown(tmp_path):
    rf = _read(tmp_path, "import os\n" + HEAD +
               "def f() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2,\n"
               "                                                          pipeline_parallel_degree=2))\n"
               "    if os.environ.get('BIG'):\n        config.parallelism.tensor_parallel_degree = 8\n"
               "    else:\n        config.parallelism.tensor_parallel_degree = 4\n"
               "    if not isinstance(config, Trainer.Config):\n        raise TypeError('only raises')\n"
               "    return config\n")
    src = rf.functions["f"]
    u = src.unknown_of("parallelism.tensor_parallel_degree")
    assert u is not None and "condition" in u.reason
    assert src.data["parallelism"] == {"pipeline_parallel_degree": 2}


# -----------------------------------------------------------------------------
# Hostile inputs: never a traceback
# -----------------------------------------------------------------------------
HEAD = "from torchtitan.trainer import Trainer\nfrom torchtitan.config import ParallelismConfig\n\n"


def _read(tmp_path, body: str | bytes, name: str = "config_registry.py"):
    path = tmp_path / name
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body)
    return read_registry(str(path))


def test_syntax_error_is_ml005_with_position(tmp_path):
    rf = _read(tmp_path, HEAD + "def f() -> Trainer.Config:\n    return Trainer.Config(\n")
    assert rf.error is not None and rf.error.code in ("ML005",) and rf.error.line >= 4
    assert rf.functions == {}


def test_unreadable_inputs(tmp_path):
    assert read_registry(str(tmp_path / "missing.py")).error.code == "ML001"
    assert read_registry(str(tmp_path)).error.code == "ML001"
    assert _read(tmp_path, b"x = 1\n\x00\n").error.code == "ML002"
    assert _read(tmp_path, b"x = '\xff\xfe'\n").error.code == "ML002"
    # what Python accepts is accepted: a BOM, a coding cookie
    body = HEAD + "def f() -> Trainer.Config:\n    return Trainer.Config()\n"
    rf = _read(tmp_path, b"\xef\xbb\xbf" + body.encode())
    assert rf.error is None and "f" in rf.functions
    latin = ("# -*- coding: latin-1 -*-\n" + HEAD + "def f() -> Trainer.Config:\n"
             "    return Trainer.Config(dump_folder='caf\xe9')\n").encode("latin-1")
    rf = _read(tmp_path, latin)
    assert rf.error is None and rf.functions["f"].data["dump_folder"] == "caf\xe9"


def test_non_ascii_columns_are_characters(tmp_path):
    rf = _read(tmp_path, HEAD + "def f() -> Trainer.Config:\n"
                                "    return Trainer.Config(dump_folder='é', "
                                "parallelism=ParallelismConfig(tensor_parallel_degree=2))\n")
    line, col = rf.functions["f"].locate("parallelism.tensor_parallel_degree")
    assert (tmp_path / "config_registry.py").read_text().splitlines()[line - 1][col - 1:].startswith(
        "tensor_parallel_degree")


def test_deep_nesting(tmp_path):
    # too deep for Python's own parser: an input error, not a RecursionError
    rf = _read(tmp_path, "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    assert rf.error is not None and rf.error.code in ("ML005", "ML007")
    rf = _read(tmp_path, "x = " + "-" * 200000 + "1\n")
    assert rf.error is None or rf.error.code in ("ML005", "ML007")
    # parseable but deep: that value is unknown, the rest is read
    deep = "+".join(["1"] * 3000)
    rf = _read(tmp_path, HEAD + f"def f() -> Trainer.Config:\n    return Trainer.Config(steps={deep}, "
                                "parallelism=ParallelismConfig(tensor_parallel_degree=2))\n")
    if rf.error is None:
        src = rf.functions["f"]
        assert "steps" in src.unknown and "deep" in src.unknown["steps"].reason
        assert src.data["parallelism"]["tensor_parallel_degree"] == 2
    else:
        assert rf.error.code in ("ML005", "ML007")
    nested = "[" * 90 + "]" * 90
    rf = _read(tmp_path, HEAD + f"def f() -> Trainer.Config:\n    return Trainer.Config(x={nested})\n")
    assert rf.error is None and "f" in rf.functions


def test_huge_numbers_are_unknown_not_computed(tmp_path):
    rf = _read(tmp_path, HEAD + "def f() -> Trainer.Config:\n    return Trainer.Config(parallelism=ParallelismConfig(\n"
                                "        tensor_parallel_degree=10 ** 100,\n"
                                "        pipeline_parallel_degree=2 ** 10000000,\n"
                                "        context_parallel_degree=99999999999999999999999999,\n"
                                "        expert_parallel_degree=(10 ** 9) * (10 ** 9) * 1000,\n"
                                "        data_parallel_shard_degree=2 ** 10,\n"
                                "    ), dump_folder='a' * 10 ** 9)\n")
    src = rf.functions["f"]
    for key in ("tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree",
                "expert_parallel_degree"):
        assert f"parallelism.{key}" in src.unknown, key
    assert src.data["parallelism"] == {"data_parallel_shard_degree": 1024}
    assert "dump_folder" in src.unknown
    rf = _read(tmp_path, "x = " + "9" * 5000 + "\n")
    assert rf.error is None or rf.error.code in ("ML005", "ML007")


def test_recursion_and_derivation_cycles(tmp_path):
    rf = _read(tmp_path, HEAD +
               "def a() -> Trainer.Config:\n    return b()\n\n"
               "def b() -> Trainer.Config:\n    return a()\n\n"
               "def c() -> Trainer.Config:\n    config = c()\n    config.x = 1\n    return config\n\n"
               "def helper(n):\n    return helper(n + 1)\n\n"
               "def d() -> Trainer.Config:\n    return Trainer.Config(steps=helper(1))\n")
    assert rf.error is None
    for name in ("a", "b", "c"):
        assert set(rf.functions[name].unknown) == {""}, name
        assert "cycle" in rf.functions[name].unknown[""].reason or "depends on itself" in \
            rf.functions[name].unknown[""].reason
    assert "recursive" in rf.functions["d"].unknown["steps"].reason


def test_loops_raises_and_budgets(tmp_path):
    rf = _read(tmp_path, HEAD +
               "def loops() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n"
               "    while True:\n        config.steps = 3\n"
               "    for i in range(10 ** 9):\n        config.parallelism.pipeline_parallel_degree = i\n"
               "    return config\n\n"
               "def spin() -> Trainer.Config:\n"
               "    n = 0\n"
               "    for a in range(200):\n        for b in range(200):\n            for c in range(200):\n"
               "                n += 1\n"
               "    return Trainer.Config(steps=n)\n\n"
               "def raises() -> Trainer.Config:\n    raise ValueError('no')\n\n"
               "def raises_late() -> Trainer.Config:\n    config = Trainer.Config()\n    x = [1][5]\n"
               "    return config\n")
    assert rf.error is None
    loops = rf.functions["loops"]
    assert loops.data["parallelism"]["tensor_parallel_degree"] == 2
    assert "steps" in loops.unknown and "parallelism.pipeline_parallel_degree" in loops.unknown
    assert "not followed" in rf.functions["spin"].unknown[""].reason
    assert "raises" in rf.functions["raises"].unknown[""].reason
    assert "IndexError" in rf.functions["raises_late"].unknown[""].reason


def test_long_chain_in_reverse_order_is_linear(tmp_path):
    n = 400
    body = [HEAD]
    for i in range(n):
        if i == n - 1:
            body.append(f"def f{i}() -> Trainer.Config:\n    return Trainer.Config(steps={i})\n\n")
        else:
            body.append(f"def f{i}() -> Trainer.Config:\n    config = f{i + 1}()\n"
                        f"    config.parallelism.tensor_parallel_degree = {i}\n    return config\n\n")
    start = time.process_time()
    rf = _read(tmp_path, "".join(body))
    elapsed = time.process_time() - start
    assert rf.error is None and len(rf.functions) == n
    assert rf.functions["f0"].data["parallelism"]["tensor_parallel_degree"] == 0
    assert rf.functions["f0"].data["steps"] == n - 1
    assert all(not s.unknown for s in rf.functions.values())
    assert elapsed < 10, elapsed   # linear: a few ms per function even on a loaded machine


def test_an_interpreter_bug_is_an_unknown_not_a_traceback(tmp_path, monkeypatch):
    def boom(self, node, fr):
        if isinstance(node, ast.Call):
            raise RuntimeError("injected")
        return original(self, node, fr)

    original = pyregistry.Interp._eval
    monkeypatch.setattr(pyregistry.Interp, "_eval", boom)
    rf = _read(tmp_path, HEAD + "def f() -> Trainer.Config:\n    return Trainer.Config(steps=1)\n")
    assert rf.error is None
    assert "RuntimeError" in rf.functions["f"].unknown[""].reason


def test_odd_but_valid_python_is_read(tmp_path):
    rf = _read(tmp_path, "")
    assert rf.error is None and rf.functions == {}
    rf = _read(tmp_path, '"""Only a docstring."""\n')
    assert rf.error is None and rf.functions == {}
    rf = _read(tmp_path, HEAD +
               "import functools\n\n"
               "@functools.cache\ndef cached() -> Trainer.Config:\n    return Trainer.Config(steps=1)\n\n"
               "@register\ndef decorated() -> Trainer.Config:\n    return Trainer.Config(steps=1)\n\n"
               "async def coro() -> Trainer.Config:\n    return Trainer.Config(steps=1)\n\n"
               "def gen() -> Trainer.Config:\n    yield Trainer.Config()\n\n"
               "def walrus() -> Trainer.Config:\n    if (n := 4) > 2:\n        pass\n"
               "    return Trainer.Config(steps=n, tag=f'{n:>3}', names=[x * 2 for x in (1, 2)],\n"
               "                          mapping={**{'a': 1}, 'b': 2}, z=-(3 // 2), t=(1, 2)[::-1])\n\n"
               "def lam() -> Trainer.Config:\n    return Trainer.Config(fn=lambda x: x, s={1, 2})\n")
    assert rf.error is None
    assert rf.functions["cached"].data["steps"] == 1
    assert "decorated" in rf.functions["decorated"].unknown[""].reason
    assert "coro" in dict(rf.skipped)
    walrus = rf.functions["walrus"].data
    assert walrus["steps"] == 4 and walrus["names"] == [2, 4] and walrus["mapping"] == {"a": 1, "b": 2}
    assert walrus["z"] == -1 and walrus["t"] == [2, 1] and walrus["tag"] == "  4"
    assert set(rf.functions["lam"].unknown) == {"fn", "s"}


# -----------------------------------------------------------------------------
# torchtitan at b5bcd76c6
# -----------------------------------------------------------------------------
def _tt_files() -> list[str]:
    files = sorted(glob.glob(str(TT / "**" / "config_registry.py"), recursive=True))
    return files + sorted(glob.glob(str(TT / "torchtitan_recipes" / "**" / "*.py"), recursive=True))


@pytest.fixture(scope="module")
def tt():
    return {os.path.relpath(f, TT): read_registry(f) for f in _tt_files()}


# the values meshlint's rules read; a function is "followed" when none of them is unknown
_FACTS = ("parallelism", "training", "compile", "model.name", "model.flavor")


def _followed(src: PySource) -> bool:
    return not any(k == "" or k.split(".")[0] in ("parallelism", "training", "compile") or k in
                   ("model", "model.name", "model.flavor") for k in src.unknown)


@needs_tt
def test_every_real_registry_is_read_and_counted(tt):
    assert len([f for f in tt if f.endswith("config_registry.py")]) == 17
    assert all(rf.error is None for rf in tt.values()), {f: rf.error for f, rf in tt.items() if rf.error}
    functions = {(f, n): s for f, rf in tt.items() for n, s in rf.functions.items()}
    assert len(functions) == 193          # DIALECTS.md: 193 functions at HEAD
    followed = [k for k, s in functions.items() if _followed(s)]
    graph = [k for k in functions if "graph_trainer" in k[0]]
    assert len(graph) == 23
    assert len(followed) == 170           # every one but graph_trainer's
    assert set(functions) - set(followed) == set(graph)
    skipped = {n for rf in tt.values() for n, _ in rf.skipped}
    assert "enable_fused_swiglu" in skipped and "_gpt_oss_debugmodel" in skipped


@needs_tt
def test_graph_trainer_configs_are_unknown_with_the_reflection_named(tt):
    for f, rf in tt.items():
        if "graph_trainer" not in f:
            continue
        for name, src in rf.functions.items():
            u = src.unknown_of("parallelism.tensor_parallel_degree")
            assert u is not None, name
            assert "reflection" in src.unknown[""].reason and "fields()" in src.unknown[""].reason, name
            assert "graph_trainer/configs.py" in src.unknown[""].reason
            # at the call that rebuilds it, or at the derivation from another graph_trainer function
            text = _line(TT / f, src.unknown[""].line)
            assert "to_graph_trainer_config(" in text or "= graph_trainer_" in text, name
            assert "tensor_parallel_degree" not in src.data.get("parallelism", {}), name


def _check(tt, rel: str, fn: str, expect: dict, at: dict | None = None):
    src = tt[rel].functions[fn]
    for key, value in expect.items():
        node = src.data
        for part in key.split("."):
            node = node[part]
        assert node == value, (fn, key, node, value)
        assert src.unknown_of(key) is None, (fn, key)
    for key, text in (at or {}).items():
        line, col = src.locate(key)
        assert _line(TT / rel, line)[col - 1:].startswith(text), (fn, key, _line(TT / rel, line), text)
    return src


@needs_tt
def test_hand_checked_real_functions(tt):
    llama = "torchtitan/models/llama3/config_registry.py"
    src = _check(tt, llama, "llama3_70b",
                 {"parallelism.tensor_parallel_degree": 8, "training.num_tokens_per_microbatch_per_dp_rank": 65536,
                  "training.max_context_length": 8192, "model.name": "llama3", "model.flavor": "70B"},
                 {"parallelism.tensor_parallel_degree": "tensor_parallel_degree=8,",
                  "training.num_tokens_per_microbatch_per_dp_rank": "num_tokens_per_microbatch_per_dp_rank=8 * 8192",
                  "model.flavor": '"70B"'})
    assert not src.has_key("parallelism.pipeline_parallel_degree")
    assert src.types["activation_checkpoint"] == "FullAC.Config"
    _check(tt, llama, "llama3_405b", {"parallelism.tensor_parallel_degree": 8, "compile.enable": True,
                                      "compile.enable_async_tensor_parallel": True, "model.flavor": "405B"})
    _check(tt, llama, "llama3_debugmodel_varlen_attn",
           {"training.disable_cuda_graphs": True, "model.attn_backend": "varlen",
            "parallelism.pipeline_parallel_schedule": "Interleaved1F1B"},
           {"training.disable_cuda_graphs": "config.training.disable_cuda_graphs = True",
            "parallelism.pipeline_parallel_schedule": "llama3_debugmodel()"})
    _check(tt, "torchtitan/models/qwen3_5/config_registry.py", "qwen35_397b_a17b",
           {"parallelism.tensor_parallel_degree": 8, "parallelism.expert_parallel_degree": 16,
            "parallelism.data_parallel_shard_degree": -1, "model.name": "qwen3_5", "model.flavor": "397B-A17B"},
           {"parallelism.expert_parallel_degree": "expert_parallel_degree=16"})
    _check(tt, "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel_moe",
           {"parallelism.pipeline_parallel_degree": 2, "parallelism.num_pp_microbatches": 2,
            "training.num_tokens_per_microbatch_per_dp_rank": 512})
    ds = "torchtitan/models/deepseek_v3/config_registry.py"
    src = _check(tt, ds, "deepseek_v3_16b_minimal_async_ep",
                 {"parallelism.expert_parallel_degree": 1, "parallelism.enable_sequence_parallel": False,
                  "training.disable_cuda_graphs": False, "model.moe_comm_backend": "minimal_async_ep"},
                 {"parallelism": "config.parallelism = ParallelismConfig("})
    assert "override.imports" in src.unknown          # appended to a defaulted list by a helper
    assert src.data["parallelism"].keys() >= {"data_parallel_shard_degree", "context_parallel_degree"}
    _check(tt, "torchtitan/models/flux/config_registry.py", "flux_debugmodel",
           {"training.max_context_length": 512, "parallelism.context_parallel_degree": 1, "model.name": "flux"})
    _check(tt, "torchtitan/models/flux/config_registry.py", "flux_dev", {"training.max_context_length": 768})
    _check(tt, "torchtitan/models/kimi_k2_7/config_registry.py", "kimi_k2_5",
           {"parallelism.expert_parallel_degree": 8, "parallelism.spmd_backend": "spmd_types",
            "compile.components": ["loss"], "model.name": "kimi_k2_7", "model.flavor": "Kimi-K2.5"},
           {"parallelism.expert_parallel_degree": "expert_parallel_degree=8"})
    _check(tt, "torchtitan/models/gpt_oss/config_registry.py", "gpt_oss_debugmodel_flex",
           {"model.attn_backend": "flex", "parallelism.expert_parallel_degree": 1},
           {"model.attn_backend": "_gpt_oss_debugmodel(attn_backend"})
    feats = "torchtitan_recipes/tests/features.py"
    _check(tt, feats, "llama3_debugmodel_fsdp2_tp2_pp2_compile",
           {"parallelism.pipeline_parallel_degree": 2, "parallelism.data_parallel_shard_degree": 2,
            "parallelism.tensor_parallel_degree": 2, "parallelism.num_pp_microbatches": 8,
            "parallelism.spmd_backend": "spmd_types", "compile.enable": True,
            "training.num_tokens_per_microbatch_per_dp_rank": 2048, "model.flavor": "debugmodel"},
           {"parallelism.spmd_backend": "_use_spmd_types(config",
            "parallelism.tensor_parallel_degree": "config.parallelism.tensor_parallel_degree = 2"})
    _check(tt, "torchtitan_recipes/tests/models.py", "kimi_k2_5_debugmodel_muon_fsdp2_pp2_ep2",
           {"parallelism.pipeline_parallel_degree": 2, "parallelism.expert_parallel_degree": 2,
            "parallelism.num_pp_microbatches": 4, "training.steps": 1})
    _check(tt, "torchtitan_recipes/tests/h100.py", "deepseek_v3_debugmodel_minimal_async_ep_fsdp2_tp2_cp2_ep8",
           {"parallelism.expert_parallel_degree": 8, "parallelism.context_parallel_degree": 2,
            "parallelism.enable_sequence_parallel": False, "compile.enable": False})
    _check(tt, "torchtitan/experiments/transformers_modeling_backend/config_registry.py",
           "transformers_modeling_backend_debugmodel",
           {"parallelism.spmd_backend": "partial_dtensor", "model.name": "transformers_modeling_backend"})
    _check(tt, "torchtitan/experiments/torchft/llama3/config_registry.py", "llama3_torchft_debugmodel",
           {"model.name": "torchft/llama3", "training.steps": 100})


@needs_tt
def test_real_rl_configs(tt):
    rl = "torchtitan/experiments/rl/examples/alphabet_sort/config_registry.py"
    src = _check(tt, rl, "rl_grpo_qwen3_moe_debug_varlen",
                 {"parallelism.expert_parallel_degree": 4, "parallelism.tensor_parallel_degree": 2,
                  "model.name": "qwen3", "model.flavor": "debugmodel_moe"})
    assert src.nested_under == "trainer" and "generator" in src.outer
    # Controller.Config.__post_init__ mirrors the batcher's shape into the trainer (controller.py)
    src = _check(tt, rl, "rl_grpo_qwen3_0_6b_flex_batch_invariant",
                 {"training.max_context_length": 2048, "training.num_tokens_per_microbatch_per_dp_rank": 4096,
                  "parallelism.enable_sequence_parallel": False})
    _check(tt, "torchtitan/experiments/rl/examples/dapo_math/config_registry.py", "rl_dapo_qwen3_4b_math_32k",
           {"training.max_context_length": 34816, "parallelism.tensor_parallel_degree": 2})


@needs_tt
def test_find_config_module_on_the_real_checkout():
    path, fn = find_config_module(str(TT), "llama3", "llama3_70b")
    assert Path(path) == TT / "torchtitan/models/llama3/config_registry.py" and fn == "llama3_70b"
    path, _ = find_config_module(str(TT), "graph_trainer.llama3", "graph_trainer_llama3_70b")
    assert Path(path) == TT / "torchtitan/experiments/graph_trainer/llama3/config_registry.py"
    path, fn = find_config_module(str(TT), "graph_trainer.llama3", "llama3_debugmodel")   # imported there
    assert Path(path) == TT / "torchtitan/models/llama3/config_registry.py" and fn == "llama3_debugmodel"
    path, _ = find_config_module(str(TT), "alphabet_sort", "rl_grpo_qwen3_0_6b_varlen")
    assert Path(path) == TT / "torchtitan/experiments/rl/examples/alphabet_sort/config_registry.py"
    path, _ = find_config_module(str(TT), "torchtitan_recipes.tests.features", "llama3_debugmodel_tp2")
    assert Path(path) == TT / "torchtitan_recipes/tests/features.py"
    path, _ = find_config_module(str(TT), "torchtitan.models.qwen3", "qwen3_32b")
    assert Path(path) == TT / "torchtitan/models/qwen3/config_registry.py"
    with pytest.raises(InputError) as exc:
        find_config_module(str(TT), "lama3", "llama3_70b")
    assert exc.value.code == "ML006" and "llama3" in exc.value.help
    with pytest.raises(InputError) as exc:
        find_config_module(str(TT), "llama3", "llama3_70")
    assert exc.value.code == "ML006" and "llama3_70b" in exc.value.help


@needs_tt
def test_comment_scanner_agrees_with_tokenize_on_real_files():
    for f in _tt_files():
        text = Path(f).read_text()
        expected = [(t.start[0], t.start[1] + 1, t.string[1:]) for t in
                    tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
        assert pyregistry.scan_py_comments(text) == expected, f


@needs_tt
def test_reading_everything_stays_fast():
    # the number itself is bench/bench_registry.py's; this only catches a pathological regression
    pyregistry.clear_caches()
    start = time.process_time()
    for f in _tt_files():
        read_registry(f)
    assert time.process_time() - start < 5


def test_control_flow_that_depends_on_unknowns_is_not_guessed(tmp_path):
    rf = _read(tmp_path, "import os\n" + HEAD +
               "def early() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n"
               "    if os.environ.get('SMALL'):\n        return config\n"
               "    config.parallelism.tensor_parallel_degree = 8\n    return config\n\n"
               "def broken_loop() -> Trainer.Config:\n"
               "    config = Trainer.Config()\n"
               "    for d in (2, 4, 8):\n        config.steps = d\n"
               "        if os.environ.get('STOP'):\n            break\n"
               "    return config\n\n"
               "def method() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n"
               "    config.parallelism.scale_up(4)\n    return config\n\n"
               "def asserted() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n"
               "    assert config.parallelism.tensor_parallel_degree == 4\n    return config\n")
    assert set(rf.functions["early"].unknown) == {""}
    assert "return" in rf.functions["early"].unknown[""].reason
    assert set(rf.functions["broken_loop"].unknown) == {""}
    method = rf.functions["method"]
    assert method.unknown_of("parallelism.tensor_parallel_degree") is not None
    assert "scale_up" in method.unknown["parallelism"].reason
    assert "assert" in rf.functions["asserted"].unknown[""].reason


def test_a_helper_that_returns_early_poisons_only_what_it_may_write(tmp_path):
    rf = _read(tmp_path, "import os\n" + HEAD +
               "def maybe_scale(config):\n    if os.environ.get('X'):\n        return\n"
               "    config.parallelism.tensor_parallel_degree = 8\n\n"
               "def pick(config):\n    if os.environ.get('X'):\n        return 1\n"
               "    return config.parallelism.tensor_parallel_degree\n\n"
               "def writes() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n"
               "    maybe_scale(config)\n    return config\n\n"
               "def reads() -> Trainer.Config:\n"
               "    config = Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n"
               "    config.steps = pick(config)\n    return config\n")
    writes = rf.functions["writes"]
    assert writes.unknown_of("parallelism.tensor_parallel_degree") is not None
    reads = rf.functions["reads"]
    assert reads.data["parallelism"] == {"tensor_parallel_degree": 2}
    assert "steps" in reads.unknown


def test_big_shared_values_stay_cheap(tmp_path):
    funcs = "".join(f"def f{i}() -> Trainer.Config:\n    return Trainer.Config(x=BIG, y=f{i + 1}() if False else 1)\n\n"
                    for i in range(300))
    start = time.process_time()
    rf = _read(tmp_path, HEAD + "BIG = [0] * 10000\nHUGE = [0] * 10 ** 6\n\n" + funcs +
               "def g() -> Trainer.Config:\n    return Trainer.Config(x=HUGE)\n")
    assert rf.error is None and len(rf.functions) == 301
    assert time.process_time() - start < 20
    assert "x" in rf.functions["g"].unknown
