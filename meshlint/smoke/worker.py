"""One rank of a real smoke: rendezvous, build the meshes, verify them, report placement. [torch]

``run_rank`` is the entry point torch's elastic agent starts on every rank of
meshlint's own launch; ``run_as_launched_rank`` is the same for a process that
torchrun or srun started. Every phase is timed and written to the progress
file before and after; an exception is recorded with its phase and re-raised,
so torch's agent ends the run and the launching process reports who failed.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from meshlint.smoke import faults, rankenv
from meshlint.smoke.plan import PLACEMENT_SEVERITY
from meshlint.smoke.progress import Progress

SLACK_S = 30  # collectives time out this long after the watchdog's deadline, so the watchdog reports first


def run_rank(job: dict) -> dict:
    from meshlint.smoke import lifeline

    # the fork server (or the agent) started this rank: end with it, or with the agent, SIGKILL included
    lifeline.watch(lifeline.die, parent=os.getppid(), depends_on=(job["agent_pid"],) if job.get("agent_pid") else ())
    env = rankenv.detect()
    if env is None:  # pragma: no cover - the agent always sets RANK and WORLD_SIZE
        raise RuntimeError("run_rank started without RANK/WORLD_SIZE")
    return _run(job, env)


def identity(env: rankenv.RankEnv) -> dict:
    """Where a rank runs, as its progress state and the placement check record it."""
    return {"host": env.host, "node": env.node, "local_rank": env.local_rank,
            "local_world_size": env.local_world_size, "launcher": env.launcher}


def _run(job: dict, env: rankenv.RankEnv, prog: Progress | None = None) -> dict:
    import torch
    import torch.distributed as dist

    from meshlint.smoke.verify import build_and_verify

    plan, device, backend = job["plan"], job["device"], job["backend"]
    identity_ = identity(env)
    prog = prog or Progress(job.get("progress_dir"), env.rank, identity_)
    rank = env.rank
    # a watchdog (the launching process's, or watchdog.RankWatchdog) always ends the run first
    timeout = timedelta(seconds=job["timeout"] + SLACK_S)
    with prog.phase("rendezvous"):
        faults.maybe_inject(rank, "rendezvous")
        prog.step("init_process_group")
        if device == "cuda":
            torch.cuda.set_device(env.local_rank)
        dist.init_process_group(backend, timeout=timeout)
    if job.get("floor"):
        return _floor(prog, device, env)
    try:
        meshes = build_and_verify(plan, rank, prog, device, world_groups=rank == 0,
                                  before=lambda phase: faults.maybe_inject(rank, phase))
        with prog.phase("placement"):
            faults.maybe_inject(rank, "placement")
            prog.step("all_gather_object placement")
            everyone: list = [None] * env.world_size
            dist.all_gather_object(everyone, identity_ | {"rank": rank})
            if rank == 0:
                check_placement(plan, everyone, prog)
        if job.get("step") and _everyone_ok(prog, device):
            with prog.phase("probe"):
                from meshlint.smoke import probe

                prog.state["probe"] = probe.run(plan, meshes, rank, device, step=prog.step)
            with prog.phase("step"):
                faults.maybe_inject(rank, "step")
                prog.step("training step")
                _train(plan, meshes, rank, device, prog, backend)
        extra = {"placement": everyone} if rank == 0 else {}
        state = prog.finish(**extra)
        if job.get("gather"):  # no launching process of ours: rank 0 collects every rank's findings
            # a gather, not an all_gather: a rank is done once its own state is sent, so rank 0 leaving
            # first cannot fail a peer still receiving the others' (seen with two torchrun nodes)
            states: list | None = [None] * env.world_size if rank == 0 else None
            dist.gather_object(state, states, dst=0)
            state = dict(state, all_states=states) if rank == 0 else state
        return state
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - a peer that left first: the run's result is already settled
                pass


def _everyone_ok(prog: Progress, device: str) -> bool:
    """All ranks agree to train only if no rank found a problem (one collective, so none waits alone)."""
    import torch
    import torch.distributed as dist

    flag = torch.tensor([0 if prog.state["failures"] else 1], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    if not int(flag.item()):
        prog.state["step_skipped"] = "a rank's mesh checks failed"
    return bool(int(flag.item()))


def _train(plan: dict, meshes: dict, rank: int, device: str, prog: Progress, backend: str) -> None:
    """Issue 5's step: one sharded training step against the unsharded reference."""
    from meshlint.smoke import layouts
    from meshlint.smoke import step as train

    result = train.run(plan, layouts.for_plan(plan, meshes, backend), rank, device,
                       sabotage=os.environ.get(train.SABOTAGE_VARIABLE))
    prog.state["training"] = result
    tol = result["tolerance"]
    for name in ("loss", "grad_norm"):
        err = result[f"{name}_rel_error"]
        if err is not None and err > tol:
            prog.fail(check="step", quantity=name, expected=result[f"reference_{name}"], actual=result[name],
                      message=f"the {name.replace('_', ' ')} differs from the unsharded model's: "
                              f"{result[name]:.8g} vs {result[f'reference_{name}']:.8g} (relative error {err:.2e} "
                              f"> {tol:g})")
    bad = result["mismatched"]
    if bad:
        worst = sorted(bad, key=lambda n: -bad[n]["rel_error"])
        common = result["culprits"]
        prog.fail(check="step", quantity="gradients", params=worst, suspects=common,
                  errors={n: bad[n]["rel_error"] for n in worst}, checked=result["params_checked"],
                  message=f"{len(bad)} of {len(result['params_checked'])} parameter gradients differ from the "
                          f"unsharded model's (worst: {worst[0]}, relative error {bad[worst[0]]['rel_error']:.1e} > "
                          f"{tol:g}); suspect {', '.join(common) or 'the combination'}")


def _floor(prog: Progress, device: str, env: rankenv.RankEnv) -> dict:
    """bench/bench_smoke.py's baseline: the same launch doing only a 1-D mesh and one barrier."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    try:
        with prog.phase("mesh"):
            init_device_mesh(device, (env.world_size,))
            dist.barrier()
        return prog.finish()
    finally:
        dist.destroy_process_group()


def check_placement(plan: dict, ranks: list[dict], prog: Progress) -> None:
    """Every tp (and etp) group on one node; ep and cp groups too, or a warning. ``ranks[r]["node"]``."""
    from meshlint.smoke.plan import axis_of

    node_of = {r["rank"]: r["node"] for r in ranks}
    world = len(ranks)
    for name, spec in plan["axes"].items():
        severity = PLACEMENT_SEVERITY.get(spec["role"] or "")
        if severity is None or spec["size"] < 2:
            continue
        axis = axis_of(plan, name)
        crossing, seen = [], set()
        for rank in range(min(world, axis.span)):
            members = axis.group(rank)
            if members[0] in seen:
                continue
            seen.add(members[0])
            nodes = sorted({node_of[m] for m in members})
            if len(nodes) > 1:
                crossing.append({"members": members, "nodes": nodes})
        ok = not crossing
        prog.check("placement", ok, axis=name, severity=severity, groups=len(seen), crossing=len(crossing))
        if crossing:
            first = crossing[0]
            detail = dict(axis=name, check="placement", crossing=len(crossing), groups=len(seen),
                          expected="one node per group", actual=first["nodes"], members=first["members"],
                          message=f"{len(crossing)} of {len(seen)} {name} groups span several nodes, e.g. "
                                  f"ranks {first['members']} on {', '.join(first['nodes'])}")
            if severity == "error":
                prog.fail(**detail)
            else:
                prog.warn(**detail)


def run_as_launched_rank(job: dict, env: rankenv.RankEnv, prog: Progress | None = None) -> dict:
    """A process torchrun or srun started: fill in what env:// needs, then run as that rank."""
    os.environ.update({k: v for k, v in rankenv.rendezvous_env(env).items() if k not in os.environ})
    start = time.perf_counter()
    state = _run(job, env, prog)
    state["seconds"] = round(time.perf_counter() - start, 3)
    return state
