"""Who this process is, when a launcher (torchrun, srun) started it as a rank. No torch."""

from __future__ import annotations

import os
import socket
from typing import NamedTuple


class RankEnv(NamedTuple):
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node: str          # where the rank runs: host, plus the launcher's node index (two agents on one host differ)
    host: str
    launcher: str      # torchrun | srun | elastic (meshlint's own launch)


def detect(environ: dict | None = None) -> RankEnv | None:
    """The rank this process is, from torchrun's or SLURM's variables; None when nobody launched it."""
    env = os.environ if environ is None else environ
    host = socket.gethostname()
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", rank))
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
        group = env.get("GROUP_RANK", env.get("SLURM_NODEID", "0"))
        launcher = "elastic" if env.get("MESHLINT_SMOKE_RUN") else "torchrun"
        return RankEnv(rank, world, local, local_world, f"{host}#{group}", host, launcher)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        local = int(env.get("SLURM_LOCALID", 0))
        per_node = env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        local_world = int(per_node) if per_node.isdigit() else int(env.get("SLURM_TASKS_PER_NODE", "1").split("(")[0] or 1)
        return RankEnv(rank, world, local, local_world, f"{host}#{env.get('SLURM_NODEID', '0')}", host, "srun")
    return None


def rendezvous_env(r: RankEnv, environ: dict | None = None) -> dict:
    """The variables ``init_process_group("env://")`` needs, filled in for srun (which sets none of them)."""
    env = os.environ if environ is None else environ
    out = {"RANK": str(r.rank), "WORLD_SIZE": str(r.world_size), "LOCAL_RANK": str(r.local_rank)}
    if "MASTER_ADDR" not in env:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "localhost"
        out["MASTER_ADDR"] = _first_host(nodelist)
    if "MASTER_PORT" not in env:
        # the same on every rank of a job step, and unlikely to collide with another step
        step = int(env.get("SLURM_JOB_ID", "0") or 0) * 7 + int(env.get("SLURM_STEP_ID", "0") or 0)
        out["MASTER_PORT"] = str(20000 + step % 20000)
    return out


def _first_host(nodelist: str) -> str:
    """``node[012-015,020],other`` -> ``node012`` (SLURM's compressed host list, first entry)."""
    head = nodelist.split(",")[0] if "[" not in nodelist.split(",")[0] else nodelist
    if "[" not in head:
        return head
    prefix, _, rest = head.partition("[")
    first = rest.split(",")[0].split("-")[0].rstrip("]")
    return prefix + first
