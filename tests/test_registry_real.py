"""Ground truth for the static reader: run torchtitan's own config functions and compare.

Where torch, tyro, numpy and spmd_types are installed and the torchtitan checkout
at ../shared/frameworks/torchtitan-b5bcd76c6 is present, a child process imports
each registry module of the checkout and builds each config exactly as
``torchrun -m torchtitan.train --module M --config F`` does: through
``ConfigManager().parse_args`` (tyro rebuilds the config, so ``__post_init__``
runs on the final values), falling back to calling the function when tyro refuses;
in the suite one function in ``TYRO_EVERY`` goes through tyro and the others are
called (``MESHLINT_LONG=1``: all through tyro).
The parallelism, training and compile values and the model flavor are compared
with ``meshlint.inputs.pyregistry``'s static reading: every value the static
reader says it knows must equal the real one, and every value it leaves
defaulted must equal the real dataclass default.

Optional packages the registries import but that play no part in building a
config (kernels, data loaders, loggers, vLLM) are replaced in the child by inert
stand-ins (listed in ``STAND_INS``; ``triton`` and ``torchvision`` only for imports
made by the checkout itself, so torch's own probes see the truth). A module or
function that still cannot be imported or run here (torchao missing, a GPU check)
is skipped and counted; the counts are printed (``pytest -s``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from meshlint.inputs.pyregistry import read_registry

TT = Path(__file__).resolve().parents[2] / "shared" / "frameworks" / "torchtitan-b5bcd76c6"
NEEDED = ("torch", "tyro", "numpy", "spmd_types")
STAND_INS = ("triton", "torchvision", "grain", "vllm", "transformers", "datasets", "tokenizers", "tensorboard",
             "renderers", "aiohttp", "einops", "fla", "google", "safetensors", "torchstore", "math_verify",
             "monarch")
ONLY_FOR_THE_CHECKOUT = ("triton", "torchvision")
# Every TYRO_EVERY-th function (and every RL one) is built through tyro's ConfigManager, as the launch
# does (slow: tyro rebuilds the whole config tree); the others by calling them, which gives the same
# config wherever no __post_init__ reads values set after construction. MESHLINT_LONG=1: all via tyro.
TYRO_EVERY = 1 if os.environ.get("MESHLINT_LONG", "") not in ("", "0") else 5


def _missing() -> list[str]:
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


pytestmark = [
    pytest.mark.skipif(not TT.is_dir(), reason=f"{TT} is absent (torchtitan main checkout)"),
    pytest.mark.skipif(bool(_missing()), reason=f"not installed: {', '.join(_missing())}"),
]

CHILD = textwrap.dedent('''
    import ast, contextlib, dataclasses, glob, importlib, importlib.abc, importlib.machinery, io, json, os
    import sys, types, warnings
    warnings.filterwarnings("ignore")
    ROOT, STAND_INS, ONLY_FOR_THE_CHECKOUT = sys.argv[1], set(sys.argv[2].split(",")), set(sys.argv[3].split(","))
    TYRO_EVERY = int(sys.argv[4])  # tyro (slow: it rebuilds the whole config tree) for every n-th function
    counter = 0
    sys.path.insert(0, ROOT)
    used = set()

    class _Meta(type):
        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _anything(cls.__name__ + "." + name)
        def __call__(cls, *args, **kwargs):
            if cls.__dict__.get("_stand_in"):
                if len(args) == 1 and callable(args[0]) and not kwargs:
                    return args[0]          # used as a decorator
                return _anything(cls.__name__ + "()")
            return super().__call__(*args, **kwargs)
        def __getitem__(cls, item):
            return cls
        def __or__(cls, other):
            return cls
        def __ror__(cls, other):
            return cls
        def __iter__(cls):
            return iter(())
        def __bool__(cls):
            return False

    def _anything(name):
        return _Meta(name, (), {"_stand_in": True})

    class _Module(types.ModuleType):
        __version__ = "99.0.0"
        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            value = _anything(self.__name__ + "." + name)
            setattr(self, name, value)
            return value

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            top = fullname.split(".")[0]
            if top not in STAND_INS:
                return None
            if top in ONLY_FOR_THE_CHECKOUT:
                frame = sys._getframe(1)
                while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                    frame = frame.f_back
                if frame is None or not frame.f_code.co_filename.startswith(ROOT):
                    return None
            used.add(top)
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        def create_module(self, spec):
            module = _Module(spec.name)
            module.__path__ = []
            return module
        def exec_module(self, module):
            pass

    sys.meta_path.append(_Finder())

    def plain(value, depth=0):
        if isinstance(value, (bool, int, float, str, type(None))):
            return value
        if depth < 6 and isinstance(value, (list, tuple)):
            return [plain(v, depth + 1) for v in value]
        if depth < 6 and isinstance(value, dict):
            return {str(k): plain(v, depth + 1) for k, v in value.items()}
        return repr(value)

    def section(obj):
        if obj is None or not dataclasses.is_dataclass(obj):
            return None
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}

    files = sorted(glob.glob(ROOT + "/**/config_registry.py", recursive=True))
    files += sorted(glob.glob(ROOT + "/torchtitan_recipes/**/*.py", recursive=True))
    out = {"modules": {}}
    for path in files:
        dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        if dotted.endswith("__init__"):
            continue
        entry = out["modules"][dotted] = {"path": path, "functions": {}}
        try:
            module = importlib.import_module(dotted)
        except BaseException as exc:
            entry["error"] = (type(exc).__name__ + ": " + str(exc))[:300]
            continue
        for node in ast.parse(open(path).read()).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            result = {}
            counter += 1
            try:
                try:
                    # RL's Controller.Config.__post_init__ derives trainer values from the final config,
                    # which only tyro's rebuild (what the launch does) sees: those always go through tyro
                    if counter % TYRO_EVERY and ".rl." not in dotted:
                        raise LookupError("direct call: not this function's turn for tyro")
                    from torchtitan.config.manager import ConfigManager
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                        config = ConfigManager().parse_args(["--module", dotted, "--config", node.name])
                    result["how"] = "tyro"
                except BaseException as exc:
                    result["tyro_error"] = (type(exc).__name__ + ": " + str(exc))[:200]
                    config = getattr(module, node.name)()
                    result["how"] = "call"
                trainer = config if hasattr(config, "parallelism") else getattr(config, "trainer", None)
                for name in ("parallelism", "training", "compile"):
                    sec = getattr(trainer, name, None)
                    result[name] = section(sec)
                    try:
                        result["default_" + name] = section(type(sec)()) if sec is not None else None
                    except BaseException:
                        result["default_" + name] = None
                spec = getattr(trainer, "model_spec", None) or getattr(config, "model_spec", None)
                result["flavor"] = getattr(spec, "flavor", None)
            except BaseException as exc:
                result = {"error": (type(exc).__name__ + ": " + str(exc))[:300]}
            entry["functions"][node.name] = result
    out["stand_ins_used"] = sorted(used)
    print("@@JSON@@" + json.dumps(out))
''')


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("tt-real")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONWARNINGS"] = "ignore"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(TT), ",".join(STAND_INS), ",".join(ONLY_FOR_THE_CHECKOUT),
                           str(TYRO_EVERY)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=1800)
    marker = proc.stdout.rfind("@@JSON@@")
    if marker < 0:
        pytest.skip(f"the torchtitan checkout could not be run here (exit {proc.returncode}): {proc.stderr[-600:]}")
    return json.loads(proc.stdout[marker + len("@@JSON@@"):])


def _compare(src, res) -> tuple[list, int]:
    """(disagreements, fields left unknown by the static reader) for one function."""
    bad, unknown = [], 0
    for name in ("parallelism", "training", "compile"):
        got = res.get(name) or {}
        default = res.get("default_" + name) or {}
        for field, value in got.items():
            key = f"{name}.{field}"
            if src.unknown_of(key) is not None:
                unknown += 1
                continue
            if src.has_key(key):
                static = src.data[name][field]
                if static != value:
                    bad.append((key, static, value))
            elif field in default and default[field] != value:
                bad.append((key, "defaulted", default[field], value))
    if res.get("flavor") is not None and src.unknown_of("model.flavor") is None:
        static = (src.data.get("model") or {}).get("flavor")
        if static != res["flavor"]:
            bad.append(("model.flavor", static, res["flavor"]))
    return bad, unknown


def test_static_reading_gives_the_values_running_gives(real):
    counts = {"functions_run": 0, "compared": 0, "agreed": 0, "agreed_with_unknown_fields": 0,
              "static_whole_unknown": 0, "via_tyro": 0, "skipped_module_import": 0, "skipped_function_error": 0}
    disagreements = []
    skipped = []
    for dotted, entry in real["modules"].items():
        if "error" in entry:
            counts["skipped_module_import"] += 1
            skipped.append((dotted, entry["error"]))
            continue
        rf = read_registry(entry["path"])
        assert rf.error is None
        for name, res in entry["functions"].items():
            if "error" in res:
                counts["skipped_function_error"] += 1
                skipped.append((f"{dotted}::{name}", res["error"]))
                continue
            counts["functions_run"] += 1
            counts["via_tyro"] += res.get("how") == "tyro"
            src = rf.functions.get(name)
            assert src is not None, f"{dotted}::{name} runs as a config function but the static reader skipped it"
            if "" in src.unknown:
                counts["static_whole_unknown"] += 1     # graph_trainer: reflection, reported, never guessed
                continue
            counts["compared"] += 1
            bad, unknown = _compare(src, res)
            if bad:
                disagreements.append((f"{dotted}::{name}", bad))
            else:
                counts["agreed"] += 1
                counts["agreed_with_unknown_fields"] += bool(unknown)
    print("\nreal-run comparison:", json.dumps(counts), "stand-ins used:", real.get("stand_ins_used"))
    for what, why in skipped:
        print("  skipped:", what, "--", why[:120])
    assert not disagreements, disagreements
    assert counts["compared"] >= 1


def test_what_the_static_reader_leaves_unknown_does_run(real):
    """graph_trainer's configs build by reflection: unknown statically, and indeed real configs."""
    ran = [(d, n) for d, e in real["modules"].items() if "graph_trainer" in d
           for n, r in e.get("functions", {}).items() if "error" not in r]
    if not ran:
        pytest.skip("no graph_trainer config could be built here")
    for dotted, name in ran:
        entry = real["modules"][dotted]
        src = read_registry(entry["path"]).functions[name]
        assert "" in src.unknown and "reflection" in src.unknown[""].reason
        assert entry["functions"][name]["parallelism"]["spmd_backend"] == "partial_dtensor"
