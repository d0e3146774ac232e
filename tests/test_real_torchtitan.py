"""meshlint's torchtitan resolution against the real ParallelDims of torchtitan 0.2.2, 0.3.0 and main.

Each version's own ``ParallelDims(...).build_mesh()`` runs on the fake process group (recipe in
shared/DIALECTS.md) in a subprocess of its own (tests/real_torchtitan_worker.py: every version is
the package ``torchtitan``), on a few hundred seeded configs: valid ones, ones the constructor
rejects, ones that die late in ``build_mesh``. For each, meshlint must give the same verdict (ok,
or the same exception type at the same stage, the constructor's message included), the same
resolved ``dp_shard``, every global mesh by the name ParallelDims gives it with the same dims and
sizes (and, when the build dies, the same mesh missing), every 1-D mesh by name with its size, and
what ``get_optional_mesh`` returns for each. Any difference fails, listing config, real, meshlint.

Where a piece is absent the tests skip saying why: torch, spmd_types or tyro not installed,
.frameworks/ not set up (``.ci/frameworks.sh``), ../shared missing, or meshlint's version modules
(meshlint/frameworks/versions.py) not there yet.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FRAMEWORKS = ROOT / ".frameworks"
WORKER = Path(__file__).resolve().parent / "real_torchtitan_worker.py"

# The suite compares 100 random configs per version; MESHLINT_LONG=1 (the long run) compares 300.
N_CONFIGS = 300 if os.environ.get("MESHLINT_LONG", "") not in ("", "0") else 100
NICE_WORLDS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
SMALL = [1, 2, 3, 4, 5, 6, 8, 16]

# version -> where its torchtitan is, meshlint's id for it, its spmd backends, whether it has etp
VERSIONS = {
    "0.2.2": {"root": FRAMEWORKS / "torchtitan-0.2.2", "meshlint": "0.2.x", "backends": None, "etp": True,
              "needs": ("torch",), "seed": 22},
    "0.3.0": {"root": FRAMEWORKS / "torchtitan-0.3.0", "meshlint": "0.3.0",
              "backends": ("spmd_types", "partial_dtensor", "full_dtensor"), "etp": False,
              "needs": ("torch", "spmd_types", "tyro"), "seed": 30},
    "main": {"root": SHARED / "frameworks" / "torchtitan-b5bcd76c6", "meshlint": "main@b5bcd76c6",
             "backends": ("spmd_types", "partial_dtensor"), "etp": False,
             "needs": ("torch", "spmd_types", "tyro"), "seed": 5},
}


# --------------------------------------------------------------------------- what is missing

def _why_absent(version: str) -> str | None:
    info = VERSIONS[version]
    for package in info["needs"]:
        if importlib.util.find_spec(package) is None:
            if package == "torch":
                return "torch is not installed: the real ParallelDims runs on torch==2.13.0"
            failed = FRAMEWORKS / ("spmd_types.failed" if package == "spmd_types" else "tyro-numpy.failed")
            why = f"; last attempt: {failed.read_text().strip()}" if failed.is_file() else ""
            return f"{package} is not installed: torchtitan {version} imports it (.ci/frameworks.sh installs it{why})"
    root = info["root"]
    if not (root / "torchtitan" / "distributed" / "parallel_dims.py").is_file():
        if root.parent == FRAMEWORKS:
            failed = FRAMEWORKS / f"{root.name}.failed"
            why = f" (last attempt: {failed.read_text().strip()})" if failed.is_file() else ""
            return f"torchtitan {version} is not in {root.relative_to(ROOT)}/: run .ci/frameworks.sh{why}"
        if not SHARED.is_dir():
            return f"the shared folder {SHARED} (the repository's sibling) is missing: no torchtitan {version}"
        return f"torchtitan {version} sources are not at {root}"
    return None


def _meshlint_module(version: str):
    """(meshlint's dialect module for the version, None) or (None, why it cannot be compared yet)."""
    ident = VERSIONS[version]["meshlint"]
    try:
        from meshlint.frameworks import versions
    except ImportError as exc:
        if ident != "0.2.x":
            return None, f"meshlint.frameworks.versions is not there yet ({exc}): nothing models torchtitan {ident}"
        versions = None
    if versions is not None:
        module = versions.module("torchtitan", ident)
        if hasattr(module, "spec_from_degrees"):
            return module, None
        if ident != "0.2.x":
            return None, f"meshlint's module for torchtitan {ident} has no spec_from_degrees"
    from meshlint.frameworks.torchtitan import v0_2 as torchtitan

    return torchtitan, None


def _spec(module, degrees: dict, backend: str | None):
    if hasattr(module, "spec_from_degrees"):
        return module.spec_from_degrees(dict(degrees), **({"spmd_backend": backend} if backend else {}))
    # The v0.2 module before versions.py: a Spec filled the way its read() fills one.
    from meshlint.frameworks.base import Spec

    spec = Spec(module.NAME, dict(degrees))
    spec.load_error = module._validate_degrees(spec.degrees)
    return spec


# --------------------------------------------------------------------------- configs

def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def _degree(rng: random.Random, room: int) -> int:
    """Mostly a small divisor of what is left of the world, sometimes any small number, rarely invalid."""
    r = rng.random()
    if r < 0.86:
        return rng.choice([1, 1] + [d for d in _divisors(room) if d <= 16])
    if r < 0.975:
        return rng.choice(SMALL)
    return rng.choice([0, -1, -2])


def make_cases(version: str) -> list:
    info = VERSIONS[version]
    rng = random.Random(info["seed"])
    cases = []
    for i in range(N_CONFIGS):
        world = rng.choice(NICE_WORLDS) if rng.random() < 0.7 else rng.randint(1, 512)
        room, d = world, {}
        for name in rng.sample(["tp", "pp", "cp", "dp_replicate"], 4):
            d[name] = _degree(rng, room)
            if d[name] >= 1 and room % d[name] == 0:
                room //= d[name]
        r = rng.random()
        d["dp_shard"] = (-1 if r < 0.4 else room if r < 0.8 else rng.choice(SMALL) if r < 0.95
                         else rng.choice([0, -2, -3]))
        shard = room if d["dp_shard"] == -1 else d["dp_shard"]
        region = shard * d["cp"] * d["tp"] if min(shard, d["cp"], d["tp"]) >= 1 else 1
        r = rng.random()
        d["ep"] = (1 if r < 0.45 else rng.choice([x for x in _divisors(region) if x <= 64]) if r < 0.85
                   else rng.choice(SMALL + [0]))
        if info["etp"]:
            r = rng.random()
            d["etp"] = 1 if r < 0.5 else d["tp"] if r < 0.8 else rng.choice([2, 3, 4, 0])
        case = {"id": i, "world": world,
                "degrees": {k: d[k] for k in ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep", "etp") if k in d}}
        if info["backends"]:
            case["spmd_backend"] = rng.choice(info["backends"])
        cases.append(case)
    return cases


# --------------------------------------------------------------------------- running the real thing

class _Runs:
    """One worker process per version, started at most once per test process; when not under
    xdist, every selected runnable version starts with the first (threads wait on them) so the
    versions share the cores."""

    def __init__(self):
        self.lock = threading.Lock()
        self.threads: dict = {}
        self.results: dict = {}
        self.together: list = []  # the versions to start with the first one asked for

    def _run(self, version: str) -> None:
        info = VERSIONS[version]
        try:
            proc = subprocess.run([sys.executable, str(WORKER), str(info["root"])],
                                  input=json.dumps(make_cases(version)), capture_output=True, text=True,
                                  timeout=300, cwd=str(ROOT))
            if proc.returncode != 0:
                self.results[version] = RuntimeError(
                    f"the torchtitan {version} worker exited {proc.returncode}:\n{proc.stderr[-3000:]}")
            else:
                self.results[version] = json.loads(proc.stdout)
        except Exception as exc:  # surfaced in the test that waits for it
            self.results[version] = exc

    def start(self, version: str) -> None:
        with self.lock:
            if version not in self.threads:
                thread = threading.Thread(target=self._run, args=(version,), daemon=True)
                self.threads[version] = thread
                thread.start()

    def get(self, version: str) -> dict:
        self.start(version)
        for other in self.together:
            self.start(other)
        self.threads[version].join()
        result = self.results[version]
        if isinstance(result, Exception):
            raise result
        return result


RUNS = _Runs()


@pytest.fixture(scope="module")
def real_runs(request):
    """The worker runs; outside xdist, the selected versions that can run all start together.
    (Under xdist each worker runs only the version it was given: nothing else is started.)"""
    if "PYTEST_XDIST_WORKER" not in os.environ and not RUNS.together:
        selected = [item.callspec.params["version"] for item in request.session.items
                    if getattr(item, "originalname", None) == "test_meshlint_agrees_with_real_parallel_dims"
                    and hasattr(item, "callspec")]
        RUNS.together = [v for v in VERSIONS
                         if v in selected and _why_absent(v) is None and _meshlint_module(v)[1] is None]
    return RUNS


# --------------------------------------------------------------------------- comparing

STAGES = {"load": "constructor", "resolve": "constructor", "mesh": "build_mesh"}
# which global mesh of ``_global_meshes`` a DeviceMesh that build_mesh holds is, by its dims
GLOBAL_BY_DIMS = {
    ("pp", "batch", "cp", "tp"): "dataloading",
    ("loss_mesh",): "loss",
    ("pp", "dp_replicate", "fsdp", "tp"): "dense",
    ("pp", "dp_replicate", "dp_shard", "cp", "tp"): "dense",
    ("dp", "cp", "tp"): "spmd_dense_for_fwdbwd",
    ("pp", "dp", "cp", "tp"): "spmd_dense_for_fwdbwd",  # an unflatten that fails: the mesh it slices
    ("pp", "dp_replicate", "efsdp", "ep"): "sparse",
    ("pp", "dp_replicate", "efsdp", "ep", "etp"): "sparse",
    ("dp_replicate", "efsdp", "ep"): "spmd_sparse_for_fwdbwd",
}


def _real_partial(real: dict) -> tuple[dict, str | None]:
    """When build_mesh died: the global meshes it had built, and the one whose unflatten failed."""
    where = real.get("raised_in", {})
    built = {}
    for dims, sizes in where.get("built", []):
        name = GLOBAL_BY_DIMS.get(tuple(dims))
        if name and tuple(dims) != ("pp", "dp", "cp", "tp"):
            built[name] = (dims, sizes)
    failing = where.get("unflattening")
    failed = GLOBAL_BY_DIMS.get(tuple(failing[0]), "unflatten " + "/".join(failing[0])) if failing else None
    return built, failed


def _meshlint_view(res) -> dict:
    """What meshlint says, in the worker's terms. The registry-era modules give ParallelDims'
    ``_global_meshes`` as ``res.global_meshes`` (name -> (dims, sizes), in order); the v0.2 module
    gives Mesh objects in ``res.meshes`` and the flattened ``loss`` as an axis."""
    error = res.framework_error
    view = {
        "verdict": "ok" if error is None else "error",
        "stage": None if error is None else STAGES.get(res.error_stage, f"meshlint stage {res.error_stage!r}"),
        "error_type": None if error is None else (re.match(r"\w+", error) or [error])[0],
        "error": error,
        "dp_shard": res.degrees.get("dp_shard") if res.degrees else None,
        "meshes": {n: None if m is None else (list(m.dims), list(m.sizes)) for n, m in res.meshes.items()},
        "global": None,
        "ordered": False,  # whether meshlint gives the global meshes in ParallelDims' order
        "axes": {n: a.size for n, a in res.axes.items()},
        "optional": {},
        "spmd_meshes": None,
    }
    glob = getattr(res, "global_meshes", None)
    if glob:
        view["global"] = {n: (list(dims), list(sizes)) for n, (dims, sizes) in glob.items()}
        view["ordered"] = True
    elif error is None:
        view["global"] = {n: m for n, m in view["meshes"].items() if m is not None}
        if "loss" not in res.meshes and "loss" in res.axes:  # v0.2 module: loss is an axis
            view["global"]["loss"] = (["loss_mesh"], [res.axes["loss"].size])
    for how, what in res.submeshes:
        name = re.fullmatch(r'get_optional_mesh\("(\w+)"\)', how)
        if name:
            size = re.match(r"(\d+) ranks?\b", what)
            view["optional"][name[1]] = int(size[1]) if size else None
        elif how == "spmd_meshes()":  # "[(dp_replicate, dp_shard, tp) 2×4×2, (...) ...]"
            view["spmd_meshes"] = [[[d.strip() for d in dims.split(",")], [int(x) for x in sizes.split("×")]]
                                   for dims, sizes in re.findall(r"\(([^)]*)\) ([\d×]+)", what)]
    return view


def compare(real: dict, ml: dict) -> list:
    """The differences between what the real ParallelDims did and what meshlint says, in words."""
    diffs = []
    if real["verdict"] != ml["verdict"]:
        return [f"verdict: real {real['verdict']}"
                + (f" ({real['stage']}: {real['error_type']}: {real['error']})" if real["verdict"] == "error" else "")
                + f", meshlint {ml['verdict']}" + (f" ({ml['stage']}: {ml['error']})" if ml["error"] else "")]
    if real["verdict"] == "error":
        if real["stage"] != ml["stage"]:
            diffs.append(f"stage: real {real['stage']}, meshlint {ml['stage']} ({ml['error']})")
        if real["error_type"] != ml["error_type"]:
            diffs.append(f"exception: real {real['error_type']}: {real['error']}; meshlint {ml['error']}")
        elif real["stage"] == "constructor" and real["error"] and real["error"] not in ml["error"]:
            diffs.append(f"message: real {real['error']!r} is not in meshlint's {ml['error']!r}")
    if "dp_shard" in real and real["dp_shard"] != ml["dp_shard"]:
        diffs.append(f"dp_shard: real {real['dp_shard']}, meshlint {ml['dp_shard']}")
    if real["verdict"] == "ok":
        want = {n: tuple(m) for n, m in real["meshes"].items()}
        got = ml["global"]
        for name in list(want) + [n for n in got if n not in want]:
            w, g = want.get(name), got.get(name)
            if g is None or w is None or tuple(g) != w:
                diffs.append(f"mesh {name}: real {_fmt(w) if w else 'not built'}, "
                             f"meshlint {_fmt(g) if g else 'absent'}")
        if not diffs and ml["ordered"] and list(got) != list(want):
            diffs.append(f"global mesh order: real {list(want)}, meshlint {list(got)}")
        for name, m in ml["meshes"].items():  # the Mesh objects meshlint lays ranks out on
            if name in want and (m is None or tuple(m) != want[name]):
                diffs.append(f"res.meshes[{name!r}]: real {_fmt(want[name])}, meshlint {_fmt(m) if m else 'None'}")
        if ml["axes"] != real["axes"]:
            diffs.append(f"1-D meshes: real {real['axes']}, meshlint {ml['axes']}")
        if ml["optional"] and ml["optional"] != real["optional"]:
            diffs.append(f"get_optional_mesh: real {real['optional']}, meshlint {ml['optional']}")
        if "spmd_meshes" in real and ml["spmd_meshes"] is not None and ml["spmd_meshes"] != real["spmd_meshes"]:
            diffs.append(f"spmd_meshes(): real {real['spmd_meshes']}, meshlint {ml['spmd_meshes']}")
    elif real["stage"] == "build_mesh":
        built, failed = _real_partial(real)
        if failed and (failed not in ml["meshes"] or ml["meshes"][failed] is not None):
            diffs.append(f"mesh {failed}: real cannot build it, meshlint "
                         f"{_fmt(ml['meshes'][failed]) if ml['meshes'].get(failed) else 'does not name it'}")
        for name, m in ml["meshes"].items():
            if m is not None and name != failed and tuple(m) != tuple(built.get(name, ())):
                diffs.append(f"mesh {name}: real {_fmt(built[name]) if name in built else 'never built it'} "
                             f"before failing on {failed}, meshlint {_fmt(m)}")
    return diffs


def _fmt(mesh) -> str:
    if isinstance(mesh, str):
        return mesh
    dims, sizes = mesh
    return "(" + ", ".join(f"{d}={s}" for d, s in zip(dims, sizes)) + ")"


def _summary(real: dict) -> dict:
    keep = ("verdict", "stage", "error_type", "error", "dp_shard", "meshes", "axes")
    return {k: real[k] for k in keep if k in real}


# --------------------------------------------------------------------------- the tests

@pytest.mark.parametrize("version", list(VERSIONS))
def test_meshlint_agrees_with_real_parallel_dims(version, real_runs):
    why = _why_absent(version)
    if why:
        pytest.skip(why)
    module, why = _meshlint_module(version)
    if why:
        pytest.skip(why)
    run = real_runs.get(version)
    assert run["parallel_dims"].startswith(str(VERSIONS[version]["root"].resolve())), run["parallel_dims"]
    cases = {c["id"]: c for c in make_cases(version)}
    disagreements, outcomes = [], {}
    for real in run["results"]:
        case = cases[real["id"]]
        res = module.resolve(_spec(module, case["degrees"], case.get("spmd_backend")), case["world"])
        diffs = compare(real, _meshlint_view(res))
        key = real["verdict"] if real["verdict"] == "ok" else real["stage"]
        outcomes[key] = outcomes.get(key, 0) + 1
        if diffs:
            config = {"world": case["world"], **case["degrees"]}
            if "spmd_backend" in case:
                config["spmd_backend"] = case["spmd_backend"]
            disagreements.append((config, diffs, _summary(real)))
    print(f"torchtitan {version}: {len(cases)} configs, {len(cases) - len(disagreements)} agree, "
          f"{len(disagreements)} disagree; real outcomes {outcomes}; loaded by {run['loaded']!r}")
    if disagreements:
        lines = [f"meshlint ({VERSIONS[version]['meshlint']}) disagrees with the real torchtitan {version} "
                 f"ParallelDims on {len(disagreements)} of {len(cases)} configs:"]
        for config, diffs, real in disagreements[:25]:
            lines.append(f"- config {config}")
            lines.extend(f"    {d}" for d in diffs)
            lines.append(f"    real: {json.dumps(real)}")
        if len(disagreements) > 25:
            lines.append(f"... and {len(disagreements) - 25} more")
        pytest.fail("\n".join(lines), pytrace=False)
    # the seeded configs exercise every outcome (a generator that stopped doing so would hide bugs)
    assert outcomes.get("ok", 0) >= len(cases) // 4, outcomes
    assert outcomes.get("constructor", 0) >= len(cases) // 10, outcomes
    if version != "main":  # main's ep check leaves build_mesh nothing to fail on
        assert outcomes.get("build_mesh", 0) >= 5, outcomes


# What torchtitan main's ParallelDims(dp_replicate=2, dp_shard=-1, cp=1, tp=2, pp=1, ep=1, world_size=8)
# built on the fake process group (spmd_types), as the worker records it: the harness self-test below.
MAIN_W8 = {
    "id": 0, "verdict": "ok", "stage": None, "dp_shard": 2,
    "meshes": {"dataloading": [["pp", "batch", "cp", "tp"], [1, 4, 1, 2]], "loss": [["loss_mesh"], [4]],
               "dense": [["pp", "dp_replicate", "dp_shard", "cp", "tp"], [1, 2, 2, 1, 2]],
               "sparse": [["pp", "dp_replicate", "efsdp", "ep"], [1, 2, 4, 1]],
               "spmd_dense_for_fwdbwd": [["dp", "cp", "tp"], [4, 1, 2]]},
    "axes": {"pp": 1, "batch": 4, "loss": 4, "dp_replicate": 2, "cp": 1, "tp": 2, "ep": 1, "efsdp": 4, "dp": 4,
             "dp_shard": 2},
    "optional": {"pp": None, "batch": 4, "loss": 4, "dp_replicate": 2, "cp": None, "tp": 2, "ep": None,
                 "efsdp": None, "dp": 4, "dp_shard": 2},
}


def test_the_comparison_reports_every_kind_of_difference():
    """The harness is strict: a recorded real result agrees, and each change to it is reported."""
    import copy

    module, why = _meshlint_module("main")
    if why:
        pytest.skip(why)
    degrees = {"dp_replicate": 2, "dp_shard": -1, "cp": 1, "tp": 2, "pp": 1, "ep": 1}
    view = _meshlint_view(module.resolve(_spec(module, degrees, "spmd_types"), 8))
    assert compare(MAIN_W8, view) == []

    def changed(edit) -> list:
        real = copy.deepcopy(MAIN_W8)
        edit(real)
        return compare(real, view)

    assert changed(lambda r: r["meshes"]["dense"][1].__setitem__(2, 4))[0].startswith("mesh dense:")
    assert changed(lambda r: r["meshes"].pop("spmd_dense_for_fwdbwd"))[0].startswith("mesh spmd_dense_for_fwdbwd:")
    moved = changed(lambda r: r["meshes"].__setitem__("loss", r["meshes"].pop("loss")))  # loss last
    assert moved[0].startswith("global mesh order")
    assert changed(lambda r: r["axes"].__setitem__("dp", 8))[0].startswith("1-D meshes:")
    assert changed(lambda r: r["optional"].__setitem__("dp_shard", None))[0].startswith("get_optional_mesh:")
    assert changed(lambda r: r.__setitem__("dp_shard", 4))[0].startswith("dp_shard:")
    assert changed(lambda r: r.update(verdict="error", stage="constructor", error_type="AssertionError",
                                      error="x"))[0].startswith("verdict:")
    failing = {**view, "verdict": "error", "stage": "constructor", "error_type": "ValueError",
               "error": "ValueError: expert_parallel_degree (3) must divide dp_shard * cp * tp (4)"}
    real_error = {"verdict": "error", "stage": "constructor", "error_type": "AssertionError", "error": "m"}
    assert compare(real_error, failing)[0].startswith("exception:")
    reworded = compare({**real_error, "error_type": "ValueError", "error": "other words"}, failing)
    assert reworded[0].startswith("message:")
    assert compare({**real_error, "stage": "build_mesh", "error_type": "ValueError", "error": "x"},
                   failing)[0].startswith("stage:")
