"""Runs Accelerate 1.15.0's own ParallelismConfig, build_device_mesh and _validate_accelerator on the fake
process group for the cases read as JSON lines on stdin; prints one JSON line per case (tests/test_real_accelerate.py).

Run with PYTHONPATH=.frameworks/accelerate-1.15.0. Two stand-ins, neither touching what is compared:
TorchTensorParallelConfig's check that transformers >= 4.52 is installed is skipped (the handler is made
without __post_init__), and _validate_accelerator gets the five attributes it reads of an Accelerator.
"""

import json
import os
import sys
import warnings

warnings.simplefilter("ignore")

import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from accelerate.parallelism_config import ParallelismConfig  # noqa: E402
from accelerate.utils.dataclasses import DistributedType, TorchTensorParallelConfig  # noqa: E402

MULTI = {"MULTI_GPU", "MULTI_NPU", "MULTI_XPU"}


class StandIn:
    """What _validate_accelerator reads of an Accelerator (accelerator.py: multi_device, is_fsdp2, ...)."""

    def __init__(self, world, dtype, fsdp_version):
        self.num_processes = world
        self.distributed_type = DistributedType(dtype)
        self.multi_device = world > 1 and dtype in MULTI
        self.is_fsdp2 = dtype == "FSDP" and fsdp_version == "2"
        self.is_main_process = True


def run(case):
    world = case["world"]
    for name, value in case["env"].items():
        os.environ["PARALLELISM_CONFIG_" + name.upper()] = str(value)  # what the launcher does: str(value)
    try:
        kwargs = {}
        if str(case["env"].get("tp_size", "1")).strip() not in ("0", "1") and _int(case["env"].get("tp_size")) > 1:
            kwargs["tp_handler"] = object.__new__(TorchTensorParallelConfig)
        pc = ParallelismConfig(**kwargs)
    except ValueError as exc:
        return {"stage": "load", "error": f"ValueError: {exc}"}
    finally:
        for name in case["env"]:
            os.environ.pop("PARALLELISM_CONFIG_" + name.upper(), None)
    try:
        mesh = pc.build_device_mesh("cpu")
    except RuntimeError as exc:
        return {"stage": "mesh", "error": f"RuntimeError: {exc}"}
    out = {"stage": None, "error": None, "mesh": None, "flattened": {}}
    if mesh is not None:
        out["mesh"] = [list(mesh.mesh_dim_names), list(mesh.mesh.shape)]
        for name in ("dp", "dp_shard_cp", "dp_cp"):
            try:
                sub = mesh[name]
            except KeyError:
                continue
            out["flattened"][name] = sub.mesh.flatten().tolist()  # rank 0's group
    try:
        pc._validate_accelerator(StandIn(world, case["dtype"], case["fsdp_version"]))
    except ValueError as exc:
        out["stage"], out["error"] = "resolve", f"ValueError: {exc}"
    out["dp_replicate"] = pc.dp_replicate_size
    return out


def _int(text):
    try:
        return int(str(text))
    except ValueError:
        return 0


def main():
    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    current = None
    for case in sorted(cases, key=lambda c: c["world"]):
        if case["world"] != current:
            if current is not None:
                dist.destroy_process_group()
            dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case["world"])
            current = case["world"]
        print(json.dumps({"id": case["id"], **run(case)}), flush=True)


if __name__ == "__main__":
    main()
