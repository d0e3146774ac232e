"""Runs torchtitan v0.1.0's own ParallelDims and ConfigManager and prints what they did, as JSON.

Usage: ``python real_torchtitan_010_worker.py ROOT < cases.json > results.json``, ROOT holding v0.1.0's
``torchtitan`` package (``.frameworks/torchtitan-0.1.0``). Input: ``{"dims": [{"id", "world", "degrees":
{dp_replicate, dp_shard, cp, tp, pp}}], "configs": [{"id", "path"}]}``.

* dims: ``ParallelDims(**degrees, world_size=world, enable_loss_parallel=True)`` (the constructor runs
  ``_validate``) then ``build_mesh("cpu")`` on the fake process group of ``world`` ranks (rank 0), as
  torchtitan/train.py:86-97 does; recorded: the verdict (and the exception, and whether the constructor or
  build_mesh raised it), dp_shard as resolved, the world mesh (dims, shape) and every 1-D mesh that
  ``world_mesh[name]`` gives for pp, dp_replicate, dp_shard, cp, tp, dp, dp_shard_cp, dp_cp (absent: not built);
* configs: ``ConfigManager().parse_args(["--job.config_file", path])`` (torchtitan/config_manager.py:575-591),
  recorded: whether it raised, and the JobConfig it built as nested dicts (``to_dict``).

torchtitan/__init__.py of v0.1.0 imports its experiments, which import ``datasets`` and more that neither
ParallelDims nor ConfigManager uses: the package is entered without running that ``__init__`` (the result
says so). Nothing in torchtitan is stubbed or patched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

NAMES = ("pp", "dp_replicate", "dp_shard", "cp", "tp", "dp", "dp_shard_cp", "dp_cp")


def load(root: str):
    sys.path.insert(0, root)
    pkg_dir = os.path.join(root, "torchtitan")
    spec = importlib.util.spec_from_file_location("torchtitan", os.path.join(pkg_dir, "__init__.py"),
                                                  submodule_search_locations=[pkg_dir])
    sys.modules["torchtitan"] = importlib.util.module_from_spec(spec)  # __init__ not executed
    import torchtitan.config_manager as cm
    import torchtitan.distributed.parallel_dims as pdm

    for module in (cm, pdm):
        where = os.path.realpath(module.__file__)
        if not where.startswith(os.path.realpath(root) + os.sep):
            raise SystemExit(f"torchtitan came from {where}, not from {root}")
    return pdm, cm


def run_dims(pdm, dist, FakeStore, case: dict) -> dict:
    out = {"id": case["id"], "verdict": "ok", "stage": None}
    try:
        pd = pdm.ParallelDims(**case["degrees"], world_size=case["world"], enable_loss_parallel=True)
    except Exception as exc:  # the framework's own verdict
        out.update(verdict="error", stage="constructor", error_type=type(exc).__name__, error=str(exc))
        return out
    out["dp_shard"] = pd.dp_shard
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case["world"])
    try:
        mesh = pd.build_mesh("cpu")
        out["mesh"] = [list(mesh.mesh_dim_names or ()), [int(s) for s in mesh.shape]]
        axes = {}
        for name in NAMES:
            if mesh.mesh_dim_names is None:
                continue  # a 0-D mesh (every degree 1) cannot be sliced
            try:
                axes[name] = int(mesh[name].size())
            except KeyError:
                continue  # not built
        out["axes"] = axes
    except Exception as exc:
        out.update(verdict="error", stage="build_mesh", error_type=type(exc).__name__, error=str(exc))
    finally:
        dist.destroy_process_group()
    return out


def run_config(cm, case: dict) -> dict:
    try:
        config = cm.ConfigManager().parse_args(["--job.config_file", case["path"]])
    except (Exception, SystemExit) as exc:
        return {"id": case["id"], "verdict": "error", "error_type": type(exc).__name__, "error": str(exc)[:500]}
    return {"id": case["id"], "verdict": "ok", "config": json.loads(json.dumps(config.to_dict(), default=str))}


def main() -> None:
    root = sys.argv[1]
    cases = json.load(sys.stdin)
    real_stdout = os.fdopen(os.dup(1), "w")  # whatever torchtitan or torch print goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import logging
    import warnings

    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    pdm, cm = load(root)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    results = {"loaded": "torchtitan/__init__.py not run (it imports its experiments and their datasets); then "
                         "import torchtitan.config_manager and torchtitan.distributed.parallel_dims",
               "parallel_dims": os.path.realpath(pdm.__file__),
               "dims": [run_dims(pdm, dist, FakeStore, c) for c in cases.get("dims", [])],
               "configs": [run_config(cm, c) for c in cases.get("configs", [])]}
    json.dump(results, real_stdout)
    real_stdout.flush()


if __name__ == "__main__":
    main()
