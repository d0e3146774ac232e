"""Who this process is, when a launcher (torchrun, srun) started it as a rank. No torch.

The launcher's variables are checked before anything runs: a value that is
not a number, out of range, or missing (``RANK`` without ``WORLD_SIZE`` or
``LOCAL_RANK``) is a ``LauncherError`` naming the variable (a usage error, exit 2).
"""

from __future__ import annotations

import os
import socket
from typing import NamedTuple

from meshlint.errors import MeshlintError

MAX_WORLD = 1 << 24


class LauncherError(MeshlintError):
    """A launcher variable that is missing or not a valid value (exit 2)."""


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
    if "RANK" in env or "WORLD_SIZE" in env:
        trio = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
        missing = [n for n in trio if n not in env]
        if missing:
            given = [n for n in trio if n in env]
            raise LauncherError(f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, but "
                                f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'}: a launcher (torchrun) "
                                "sets RANK, WORLD_SIZE and LOCAL_RANK together; unset them all to let meshlint "
                                "launch the world itself")
        world = _int(env, "WORLD_SIZE", 1, MAX_WORLD)
        rank = _int(env, "RANK", 0, world - 1, f"the WORLD_SIZE of {world}")
        local_world = _int(env, "LOCAL_WORLD_SIZE", 1, world, default=world)
        local = _int(env, "LOCAL_RANK", 0, local_world - 1, f"the LOCAL_WORLD_SIZE of {local_world}")
        _endpoint(env)
        group = env.get("GROUP_RANK", env.get("SLURM_NODEID", "0"))
        launcher = "elastic" if env.get("MESHLINT_SMOKE_RUN") else "torchrun"
        return RankEnv(rank, world, local, local_world, f"{host}#{group}", host, launcher)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        world = _int(env, "SLURM_NTASKS", 1, MAX_WORLD)
        rank = _int(env, "SLURM_PROCID", 0, world - 1, f"the SLURM_NTASKS of {world}")
        local = _int(env, "SLURM_LOCALID", 0, world - 1, default=0)
        per_node = env.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
        tasks = env.get("SLURM_TASKS_PER_NODE", "1").split("(")[0].split(",")[0]
        local_world = int(per_node) if per_node.isdigit() and len(per_node) < 9 else (
            int(tasks) if tasks.isdigit() and len(tasks) < 9 else 1)
        _endpoint(env)
        return RankEnv(rank, world, local, max(local_world, local + 1), f"{host}#{env.get('SLURM_NODEID', '0')}",
                       host, "srun")
    return None


def _int(env, name: str, low: int, high: int, what: str | None = None, default: int | None = None) -> int:
    """A launcher variable as an integer in [low, high], or a LauncherError that names it."""
    text = env.get(name)
    if text is None:
        if default is None:
            raise LauncherError(f"{name} is not set")
        return default
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise LauncherError(f"{name}={_shown(env[name])} is not a whole number from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        limit = f"below {what}" if what else f"from {low} to {high}"
        raise LauncherError(f"{name}={value} is out of range: it must be {limit}"
                            + (f" (0 to {high})" if what else ""))
    return value


def _endpoint(env) -> None:
    """MASTER_PORT (and MASTER_ADDR), where given, must be usable by ``init_process_group("env://")``."""
    if "MASTER_PORT" in env:
        _int(env, "MASTER_PORT", 1, 65535)
    if "MASTER_ADDR" in env and not env["MASTER_ADDR"].strip():
        raise LauncherError("MASTER_ADDR is set but empty")


def _shown(text: str) -> str:
    """A variable's value for a message: quoted, control characters escaped, cut short."""
    shown = repr(text[:40] + ("…" if len(text) > 40 else ""))
    return shown


def rendezvous_env(r: RankEnv, environ: dict | None = None) -> dict:
    """The variables ``init_process_group("env://")`` needs, filled in for srun (which sets none of them)."""
    env = os.environ if environ is None else environ
    out = {"RANK": str(r.rank), "WORLD_SIZE": str(r.world_size), "LOCAL_RANK": str(r.local_rank)}
    if "MASTER_ADDR" not in env:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "localhost"
        out["MASTER_ADDR"] = _first_host(nodelist)
    if "MASTER_PORT" not in env:
        # the same on every rank of a job step, and unlikely to collide with another step
        step = _digits(env.get("SLURM_JOB_ID")) * 7 + _digits(env.get("SLURM_STEP_ID"))
        out["MASTER_PORT"] = str(20000 + step % 20000)
    return out


def _digits(text: str | None) -> int:
    text = (text or "").strip()
    return int(text[:18]) if text.isascii() and text.isdigit() else 0


def _first_host(nodelist: str) -> str:
    """``node[012-015,020],other`` -> ``node012`` (SLURM's compressed host list, first entry)."""
    head = nodelist.split(",")[0] if "[" not in nodelist.split(",")[0] else nodelist
    if "[" not in head:
        return head
    prefix, _, rest = head.partition("[")
    first = rest.split(",")[0].split("-")[0].rstrip("]")
    return prefix + first
