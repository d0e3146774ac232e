"""``meshlint smoke CONFIG``: choose how to run (as a launched rank, fake, or launching the world), report. No torch here.

Exit codes: 0 the mesh was built and matches the prediction on every rank;
1 it does not, or a rank crashed, hung or sits outside the mesh; 2 a usage
error (no world size, no torch, a world too large to run here); 130 Ctrl-C.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import NamedTuple

from meshlint.errors import MeshlintError
from meshlint.smoke import plan as smoke_plan
from meshlint.smoke import rankenv
from meshlint.smoke import report as smoke_report

MAX_LOCAL_RANKS = 64  # real processes on one host; larger worlds: --fake, or torchrun/srun across nodes
TORCH_HINT = ("meshlint smoke needs torch: pip install torch==2.13.0 (the CPU wheel; on GPU hosts your CUDA build), "
              "then pip install 'meshlint[smoke]'")


class SmokeOptions(NamedTuple):
    device: str = "auto"        # auto | cpu | cuda
    backend: str = "auto"       # auto | gloo | nccl
    fake: bool = False
    ranks: tuple = ()           # --rank, for --fake
    timeout: float = 300.0
    fmt: str = "text"
    step: bool = True           # run the training step after the mesh checks (--no-step skips it)
    scale_to: int | None = None  # run on this many ranks, shrinking only the data-parallel dims


class SmokeUsageError(MeshlintError):
    pass


def smoke(path: str, options, opts: SmokeOptions) -> int:
    """Run one config's smoke; prints the report (rank 0 only, under a launcher) and returns the exit code."""
    from meshlint.check import check_file
    from meshlint.topology import CliTopology

    env = rankenv.detect()
    if env is not None and opts.scale_to not in (None, env.world_size):
        raise SmokeUsageError(f"--scale-to {opts.scale_to} disagrees with the launcher's WORLD_SIZE {env.world_size}")
    if env is not None and opts.scale_to is None:
        cli = options.topology
        if cli.world_size not in (None, env.world_size):
            raise SmokeUsageError(f"--world-size {cli.world_size} disagrees with the launcher's WORLD_SIZE "
                                  f"{env.world_size}")
        options = options._replace(topology=CliTopology(env.world_size, None, cli.gpus_per_node, cli.placement))
    report = check_file(path, options)
    if report.status == "error":
        raise SmokeUsageError(f"{path}: {report.error.message}")
    if report.status != "checked":
        raise SmokeUsageError(f"{path}: {report.note}")
    world = report.topology.world_size
    if world is None:
        raise SmokeUsageError(f"{path}: the world size is unknown: pass --world-size N, add "
                              "'# meshlint: world_size=N', or name the file *_<N>gpu.toml")
    static = [{"rule": f.code, "severity": f.severity, "line": f.line, "message": f.message}
              for f in report.findings if f.severity in ("error", "warning")]
    if importlib.util.find_spec("torch") is None:
        raise SmokeUsageError(TORCH_HINT)
    scaled = None
    if opts.scale_to:
        from meshlint.smoke import scale

        try:
            report, scaled = scale.scale(report, opts.scale_to)
        except scale.ScaleError as exc:
            raise SmokeUsageError(str(exc)) from None
        world = opts.scale_to
    try:
        plan = smoke_plan.build(report, world)
    except smoke_plan.PlanError as exc:
        result = _refused(report, world, str(exc), static)
    else:
        step = _step_request(plan, static, opts, scaled)
        if env is not None:
            result = _as_rank(plan, env, opts, step)
            if result is None:
                return 0  # not rank 0: rank 0 prints the one report
        elif opts.fake:
            result = _fake(plan, opts)
        else:
            result = _launch(plan, world, opts, step)
        result["static_findings"] = static
        if scaled:
            from meshlint.smoke.scale import describe

            result["scaled"] = scaled
            result["notes"].insert(0, describe(scaled))
    _print(result, opts.fmt)
    if result.get("ended") == "interrupted":
        return 130
    return 0 if result["ok"] else 1


def _step_request(plan: dict, static: list, opts: SmokeOptions, scaled: dict | None) -> dict:
    """Whether the ranks run the training step, and if not, why (a refusal by the framework is a failure)."""
    if not opts.step:
        return {"requested": False, "reason": "--no-step"}
    errors = [f for f in static if f["severity"] == "error"]
    if errors:
        first = errors[0]
        return {"requested": False, "blocked": True,
                "reason": f"no training step: the framework refuses this config ({first['rule']}, line "
                          f"{first['line']}: {first['message']})"}
    if plan.get("outside"):
        first, last = plan["outside"]
        return {"requested": False, "blocked": True,
                "reason": f"no training step: ranks {first}-{last} are outside the mesh the framework builds"}
    return {"requested": True, "scaled": scaled}


def _launch(plan: dict, world: int, opts: SmokeOptions, step: dict) -> dict:
    from meshlint.smoke import launch

    if world > MAX_LOCAL_RANKS:
        raise SmokeUsageError(
            f"a world of {world} ranks is too large to start on this host ({MAX_LOCAL_RANKS} at most): use --fake "
            "to build it as sample ranks of the full world, or launch across nodes with torchrun/srun "
            "(see the README)")
    job = {"plan": plan, "device": opts.device, "backend": opts.backend, "nproc": world, "step": step["requested"]}
    out = launch.launch(job, opts.timeout)
    sup = out.supervisor
    if out.ended == "error" and sup.get("error", "").startswith("--device"):
        raise SmokeUsageError(sup["error"])
    return smoke_report.assemble(plan, out.states, mode="real", launcher="elastic", device=sup.get("device"),
                                 backend=sup.get("backend"), ended=out.ended, seconds=out.seconds,
                                 timeout=opts.timeout, supervisor=sup, leftover=out.leftover, log_tail=out.log_tail,
                                 step=step)


def _fake(plan: dict, opts: SmokeOptions) -> dict:
    import time

    from meshlint import ranks as rank_info
    from meshlint.smoke import fake

    world = plan["world_size"]
    bad = [r for r in opts.ranks if not 0 <= r < world]
    if bad:
        raise SmokeUsageError(f"--rank {bad[0]} is outside the world of {world} ranks")
    sample = rank_info.sample_ranks(world, tuple(opts.ranks))
    start = time.perf_counter()
    try:
        states = fake.run(plan, sample)
    except fake.FakeUnavailable as exc:
        raise SmokeUsageError(str(exc)) from None
    return smoke_report.assemble(plan, states, mode="fake", launcher="fake", device="cpu", backend="fake",
                                 seconds=time.perf_counter() - start, ranks_expected=sample,
                                 step={"requested": False, "reason": "--fake: one process and no communication"},
                                 notes=[f"fake process group: ranks {', '.join(map(str, sample))} of {world} built "
                                        "and checked one at a time, no communication"])


def _as_rank(plan: dict, env: rankenv.RankEnv, opts: SmokeOptions, step: dict) -> dict | None:
    import time

    from meshlint.smoke import worker
    from meshlint.smoke.supervisor import choose_device

    device, backend, note = choose_device(opts.device, opts.backend, env.local_world_size)
    job = {"plan": plan, "device": device, "backend": backend, "timeout": opts.timeout, "gather": True,
           "step": step["requested"]}
    start = time.perf_counter()
    try:
        state = worker.run_as_launched_rank(job, env)
    except Exception as exc:
        sys.stderr.write(f"meshlint smoke: rank {env.rank} failed: {type(exc).__name__}: {exc}\n")
        raise SystemExit(1) from None
    if env.rank != 0:
        return None
    states = {s["rank"]: s for s in state["all_states"]}
    return smoke_report.assemble(plan, states, mode="real", launcher=env.launcher, device=device, backend=backend,
                                 seconds=time.perf_counter() - start, timeout=opts.timeout,
                                 notes=[note] if note else None, step=step)


def _refused(report, world: int, why: str, static: list) -> dict:
    """The framework stops before any mesh: nothing to launch, and the smoke says why."""
    result = {
        "version": smoke_report.VERSION, "ok": False, "config": report.path, "dialect": report.dialect,
        "world_size": world, "backend": None, "device": None, "mode": "none", "launcher": None, "ended": "refused",
        "seconds": 0.0, "timeout": None, "ranks_checked": [], "phases": [], "meshes": {},
        "expected_error": report.resolution.framework_error, "checks": [],
        "failures": [{"phase": "plan", "check": "plan", "ranks": [], "message": why}],
        "warnings": [], "placement": None, "leftover_processes": None, "notes": [], "static_findings": static,
        "step": {"ran": False, "ok": False, "reason": why}, "probe": None,
    }
    return result


def _print(result: dict, fmt: str) -> None:
    from meshlint.lint import emit

    emit(smoke_report.render_json(result) if fmt == "json" else smoke_report.render_text(result))
