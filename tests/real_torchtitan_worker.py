"""Runs one torchtitan version's real ParallelDims on a list of configs and prints what it did, as JSON.

Usage: ``python real_torchtitan_worker.py ROOT < cases.json > results.json`` where ROOT holds the
``torchtitan`` package (a checkout, or a ``pip install --target`` folder). One process per version:
every version is the package ``torchtitan``, so two cannot share an interpreter. Each case is
``{"id", "world", "degrees": {dp_replicate, dp_shard, cp, tp, pp, ep[, etp]}[, "spmd_backend"]}``;
each result says how ParallelDims ended (ok, or the exception and whether the constructor, i.e.
``_validate``, or ``build_mesh`` raised it) and, as built, every global mesh (``_global_meshes``:
name -> mesh_dim_names, shape), every 1-D mesh by name with its size, what ``get_optional_mesh``
gives for each; when build_mesh dies, which unflatten died and the meshes built before it.

Recipe (shared/DIALECTS.md): ROOT first on sys.path, ``parallel_dims.device_type = "cpu"``, the
fake process group of ``world`` ranks (rank 0), ``ParallelDims(...).build_mesh()``. Nothing in
torchtitan is stubbed or patched. The one liberty: when the package's own ``__init__`` imports
something ParallelDims never uses (0.2.2 imports its quantization converters, which import the
tokenizer and ``tokenizers``), the package is entered without running that ``__init__``; the
result says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

ALLOWED_MISSING = ("torch", "spmd_types")  # these must import: never work around them


def load(root: str):
    sys.path.insert(0, root)
    how = "import torchtitan.distributed.parallel_dims"
    try:
        import torchtitan.distributed.parallel_dims as pdm
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ALLOWED_MISSING + ("torchtitan",):
            raise
        for name in [m for m in sys.modules if m == "torchtitan" or m.startswith("torchtitan.")]:
            del sys.modules[name]
        pkg_dir = os.path.join(root, "torchtitan")
        spec = importlib.util.spec_from_file_location("torchtitan", os.path.join(pkg_dir, "__init__.py"),
                                                      submodule_search_locations=[pkg_dir])
        sys.modules["torchtitan"] = importlib.util.module_from_spec(spec)  # __init__ not executed
        import torchtitan.distributed.parallel_dims as pdm
        how = (f"torchtitan/__init__.py not run (it imports {exc.name!r}, which ParallelDims does not use); "
               "then import torchtitan.distributed.parallel_dims")
    where = os.path.realpath(pdm.__file__)
    if not where.startswith(os.path.realpath(root) + os.sep):
        raise SystemExit(f"torchtitan came from {where}, not from {root}")
    pdm.device_type = "cpu"
    return pdm, how, where


def describe(mesh) -> list:
    return [list(mesh.mesh_dim_names or ()), [int(s) for s in mesh.shape]]


def raised_in(exc: BaseException, filename: str) -> dict:
    """Where in parallel_dims.py it raised (the innermost frame there) and, read from the
    traceback's frames (nothing re-run, nothing hooked), the meshes build_mesh had in hand:
    ``built``, its local DeviceMesh variables, and ``unflattening``, the (dims, sizes) of the
    ``unflatten_mesh`` call that raised, if one did."""
    from torch.distributed.device_mesh import DeviceMesh

    out: dict = {}
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename != filename:
            continue
        out.update(function=frame.f_code.co_name, line=line)
        if frame.f_code.co_name == "build_mesh":
            out["built"] = [describe(v) for k, v in frame.f_locals.items()
                            if k != "self" and isinstance(v, DeviceMesh)]
        elif frame.f_code.co_name == "unflatten_mesh":
            out["unflattening"] = [list(frame.f_locals["dim_names"]), list(frame.f_locals["dim_degrees"])]
    return out


def run_case(pdm, dist, FakeStore, case: dict, filename: str) -> dict:
    kwargs = dict(case["degrees"], world_size=case["world"])
    if "spmd_backend" in case:
        kwargs["spmd_backend"] = case["spmd_backend"]
    out = {"id": case["id"], "verdict": "ok", "stage": None}
    try:
        pd = pdm.ParallelDims(**kwargs)
    except Exception as exc:  # the framework's own verdict: recorded, not a harness failure
        out.update(verdict="error", stage="constructor", error_type=type(exc).__name__, error=str(exc),
                   raised_in=raised_in(exc, filename))
        return out
    out["dp_shard"] = pd.dp_shard
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case["world"])
    try:
        pd.build_mesh()
        out["meshes"] = {name: describe(m) for name, m in pd._global_meshes.items()}
        one_d = getattr(pd, "_single_axis_meshes", None)
        if one_d is None:
            one_d = pd._meshes  # 0.2.x
        out["axes"] = {name: int(m.size()) for name, m in one_d.items()}
        optional = {}
        for name in one_d:
            m = pd.get_optional_mesh(name)
            optional[name] = None if m is None else int(m.size())
        out["optional"] = optional
        if hasattr(pd, "_spmd_meshes"):  # 0.3.0: spmd_meshes(), the activated dense and sparse SPMD meshes
            out["spmd_meshes"] = [describe(m) for m in pd._spmd_meshes]
    except Exception as exc:
        out.update(verdict="error", stage="build_mesh", error_type=type(exc).__name__, error=str(exc),
                   raised_in=raised_in(exc, filename))
    finally:
        dist.destroy_process_group()
    return out


def main() -> None:
    root = sys.argv[1]
    cases = json.load(sys.stdin)
    # Whatever torchtitan or torch print goes to stderr; stdout carries only the JSON.
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import logging

    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    pdm, how, where = load(root)
    logging.getLogger().setLevel(logging.WARNING)  # build_mesh logs two info lines per config
    for name in ("torchtitan", "torch.distributed"):
        logging.getLogger(name).setLevel(logging.WARNING)
    filename = pdm.__file__
    results = [run_case(pdm, dist, FakeStore, case, filename) for case in cases]
    json.dump({"loaded": how, "parallel_dims": where, "results": results}, real_stdout)
    real_stdout.flush()


if __name__ == "__main__":
    main()
