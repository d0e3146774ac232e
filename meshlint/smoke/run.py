"""``meshlint smoke CONFIG``: choose how to run (as a launched rank, fake, or launching the world), report. No torch here.

Exit codes: 0 the mesh was built and matches the prediction on every rank;
1 it does not, or a rank crashed, hung, timed out or sits outside the mesh
(with --memory: a rank not measured, or a measured peak over the GPU); 2
a usage error (no world size, no torch, a world too large to run here, a bad
launcher variable, the framework not installed); 3 --memory does not measure
this config yet; 128 + the signal when stopped by one: 130 Ctrl-C
(SIGINT), 143 SIGTERM, 129 SIGHUP.
"""

from __future__ import annotations

import importlib.util
import sys
import time
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
    quiet: bool = False         # no live progress on stderr (-q)
    memory: bool = False        # --memory (with --fake): measure one step's peak on fake tensors (smoke.memory)
    kempnerforge_root: str | None = None  # --kempnerforge-root: the KempnerForge tree --memory builds the model from


class SmokeUsageError(MeshlintError):
    pass


def smoke(path: str, options, opts: SmokeOptions) -> int:
    """Run one config's smoke; prints the report (rank 0 only, under a launcher) and returns the exit code."""
    started = time.monotonic()
    env = rankenv.detect()
    if env is not None:
        # a launched rank is bounded by --timeout from here on, whatever blocks it (see watchdog)
        from meshlint.smoke.watchdog import RankWatchdog

        run = _LaunchedRun(env, opts, started)
        run.guard = RankWatchdog(started + opts.timeout, run.on_timeout, run.on_signal)
        run.guard.start()
        _watch_launcher(env, run)
        return run.main(path, options)
    return _smoke(path, options, opts, None, None)


def _smoke(path: str, options, opts: SmokeOptions, env, run) -> int:
    from meshlint.engine.check import check_file
    from meshlint.mesh.topology import CliTopology

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
        where = f":{report.error.line}:{report.error.col}" if report.error.line else ""
        raise SmokeUsageError(f"{path}{where}: {report.error.code} {report.error.message}"
                              + (f" (help: {report.error.help})" if report.error.help else ""))
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
    if report.dialect == "megatron":
        from meshlint.smoke import megatron

        if megatron.missing():
            raise SmokeUsageError(megatron.missing())
        static_notes = [megatron.note()]
    else:
        static_notes = []
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
        extra = {"static_findings": static, "notes": static_notes}
        if scaled:
            from meshlint.smoke.scale import describe

            extra["scaled"] = scaled
            extra["note"] = describe(scaled)
        if run is not None:
            return run.run(plan, step, extra)
        if opts.fake:
            from meshlint.smoke.tmpdir import PrivateTmp

            if opts.memory:
                _memory_refusal(report)
            with PrivateTmp("meshlint-fake-"):  # torch (and the measuring processes) write there
                result = _fake(plan, opts)
                if opts.memory:
                    _measure_memory(result, report, plan, options, opts)
        else:
            result = _launch(plan, world, opts, step)
        _finish(result, extra)
    if run is not None and not run.guard.claim():
        _wait_forever()
    _print(result, opts.fmt)
    return _code(result)


def _memory_refusal(report) -> None:
    from meshlint.smoke import memory

    why = memory.refusal(report)
    if why:
        raise memory.Unsupported(f"{report.path}: {why}")


def _measure_memory(result: dict, report, plan: dict, options, opts: SmokeOptions) -> None:
    """``--memory``: each chosen rank's measured peak (rank 0 unless --rank), its failures in the report's."""
    from meshlint.smoke import memory

    try:
        section = memory.measure(report, plan, options, opts, list(opts.ranks) or [0])
    except memory.NoFramework as exc:
        raise SmokeUsageError(str(exc)) from None
    result["memory"] = section
    result["failures"].extend(memory.failures(section))
    result["ok"] = result["ok"] and section["ok"]


def _finish(result: dict, extra: dict) -> None:
    """What every report carries besides the run itself: the static findings, the scaling."""
    result["static_findings"] = extra["static_findings"]
    result["notes"].extend(extra.get("notes") or ())
    if extra.get("scaled"):
        result["scaled"] = extra["scaled"]
        result["notes"].insert(0, extra["note"])


def _code(result: dict) -> int:
    from meshlint.smoke.watchdog import exit_code

    if result.get("ended") == "interrupted":
        return exit_code(result.get("signal") or "SIGINT")
    return 0 if result["ok"] else 1


def _step_request(plan: dict, static: list, opts: SmokeOptions, scaled: dict | None) -> dict:
    """Whether the ranks run the training step, and if not, why (a refusal by the framework is a failure)."""
    if not opts.step:
        return {"requested": False, "reason": "--no-step"}
    if plan["dialect"] == "megatron":
        return {"requested": False, "reason": "no training step for Megatron-LM yet (its groups are built and "
                                              "checked)"}
    if plan.get("outside"):  # the mesh's own reason first: ranks outside it (an error finding says so too: ML321)
        first, last = plan["outside"]
        return {"requested": False, "blocked": True,
                "reason": f"no training step: ranks {first}-{last} are outside the mesh the framework builds"}
    errors = [f for f in static if f["severity"] == "error"]
    if errors:
        first = errors[0]
        return {"requested": False, "blocked": True,
                "reason": f"no training step: the framework refuses this config ({first['rule']}, line "
                          f"{first['line']}: {first['message']})"}
    return {"requested": True, "scaled": scaled}


def _launch(plan: dict, world: int, opts: SmokeOptions, step: dict) -> dict:
    from meshlint.smoke import launch

    if world > MAX_LOCAL_RANKS:
        raise SmokeUsageError(
            f"a world of {world} ranks is too large to start on this host ({MAX_LOCAL_RANKS} at most): use --fake "
            "to build it as sample ranks of the full world, or launch across nodes with torchrun/srun "
            "(see the README)")
    job = {"plan": plan, "device": opts.device, "backend": opts.backend, "nproc": world, "step": step["requested"]}
    live = None
    if not opts.quiet:
        from meshlint.smoke.live import Live

        live = Live(world)
    try:
        out = launch.launch(job, opts.timeout, show=live)
    finally:
        if live is not None:
            live.close()
    sup = out.supervisor
    if out.ended == "error" and sup.get("error", "").startswith("--device"):
        raise SmokeUsageError(sup["error"])
    return smoke_report.assemble(plan, out.states, mode="real", launcher="elastic", device=sup.get("device"),
                                 backend=sup.get("backend"), ended=out.ended, seconds=out.seconds,
                                 timeout=opts.timeout, supervisor=sup, leftover=out.leftover, log_tail=out.log_tail,
                                 step=step, signal=out.signal)


def _fake(plan: dict, opts: SmokeOptions) -> dict:
    import time

    from meshlint.mesh import ranks as rank_info
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


class _LaunchedRun:
    """One rank that torchrun or srun started: runs it, and reports whichever way it ends.

    The ranks gather one report on rank 0 when they can. When they cannot (a
    rendezvous that fails or never completes, a crash, ``--timeout``, a
    signal), every rank prints its own report (``reported_by``) in the asked
    format: on stdout, the only place its launcher is sure to keep.
    """

    def __init__(self, env: rankenv.RankEnv, opts: SmokeOptions, started: float):
        self.env, self.opts, self.started = env, opts, started
        self.guard = None
        self.plan: dict | None = None
        self.prog = None
        self.step: dict = {}
        self.extra: dict = {}
        self.device = self.backend = None
        self.notes: list = []

    def main(self, path: str, options) -> int:
        self._private_tmpdir()
        try:
            return _smoke(path, options, self.opts, self.env, self)
        except BaseException:
            if not self.guard.claim():  # the watchdog is reporting: let it end the process
                _wait_forever()
            raise
        finally:
            self.guard.stop()  # check --smoke may go on to the next config in this process
            self.cleanup()

    def _private_tmpdir(self) -> None:
        """This rank's TMPDIR for what torch writes there (torchinductor_*), removed however the rank ends."""
        from meshlint.smoke.tmpdir import PrivateTmp

        self.tmp = PrivateTmp(f"meshlint-rank{self.env.rank}-")
        self.tmp.enter()

    def cleanup(self) -> None:
        if getattr(self, "tmp", None) is not None:
            self.tmp.leave()

    def run(self, plan: dict, step: dict, extra: dict) -> int:
        from meshlint.smoke import worker
        from meshlint.smoke.progress import Progress
        from meshlint.smoke.supervisor import choose_device

        env, opts = self.env, self.opts
        self.plan, self.step, self.extra = plan, step, extra
        self.prog = Progress(_progress_dir(), env.rank, worker.identity(env))
        self.device, self.backend, note = choose_device(opts.device, opts.backend, env.local_world_size)
        self.notes = [note] if note else []
        job = {"plan": plan, "device": self.device, "backend": self.backend, "timeout": opts.timeout,
               "gather": True, "step": step["requested"]}
        try:
            state = worker.run_as_launched_rank(job, env, self.prog)
        except Exception:  # recorded in the rank's state with its phase and step
            if not self.guard.claim():
                _wait_forever()
            return self._report("failed")
        if not self.guard.claim():
            _wait_forever()
        if env.rank != 0:
            return 0  # rank 0 prints the one report
        states = {s["rank"]: s for s in state["all_states"]}
        result = smoke_report.assemble(plan, states, mode="real", launcher=env.launcher, device=self.device,
                                       backend=self.backend, seconds=time.monotonic() - self.started,
                                       timeout=opts.timeout, notes=self.notes, step=step)
        return self._print(result)

    def on_timeout(self) -> int:
        return self._report("timeout")

    def on_signal(self, name: str) -> int:
        return self._report("interrupted", signal=name)

    def _report(self, ended: str, signal: str | None = None) -> int:
        """This rank's own report (the others cannot be asked); returns the exit code."""
        env = self.env
        if self.plan is None:  # stopped before the config was even read
            why = f"stopped by {signal}" if signal else f"timed out after {self.opts.timeout:g} s"
            sys.stderr.write(f"meshlint smoke: rank {env.rank}: {why} before the run began\n")
            self.cleanup()
            return _code({"ended": ended, "signal": signal, "ok": False})
        state = _snapshot(self.prog.state) if self.prog is not None else {}
        states = {env.rank: state} if state else {}
        result = smoke_report.assemble(self.plan, states, mode="real", launcher=env.launcher, device=self.device,
                                       backend=self.backend, ended=ended, seconds=time.monotonic() - self.started,
                                       timeout=self.opts.timeout, notes=self.notes, ranks_expected=[env.rank],
                                       step=self.step, signal=signal, reported_by=env.rank,
                                       endpoint=_endpoint())
        return self._print(result)

    def _print(self, result: dict) -> int:
        _finish(result, self.extra)
        _print(result, self.opts.fmt)
        if result.get("reported_by") is not None:  # the watchdog's report: the process ends right after it
            self.cleanup()
        return _code(result)


def _snapshot(state: dict) -> dict:
    """A copy of a state the main thread may be changing (the watchdog reads it from its own thread)."""
    import copy

    for _ in range(5):
        try:
            return copy.deepcopy(state)
        except RuntimeError:  # changed size during the copy
            time.sleep(0.01)
    return {k: state.get(k) for k in ("rank", "phase", "step", "steps", "error", "done")}


PROGRESS_DIR_VARIABLE = "MESHLINT_SMOKE_PROGRESS_DIR"


def _progress_dir() -> str | None:
    """Where a launched rank also writes its progress file (rank-NNNNNNN.json), to watch a torchrun/srun run."""
    import os

    directory = os.environ.get(PROGRESS_DIR_VARIABLE)
    return directory if directory and os.path.isdir(directory) else None


def _endpoint() -> str | None:
    import os

    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    return f"{addr}:{port}" if addr and port else None


def _wait_forever() -> None:
    while True:
        time.sleep(3600)


def _watch_launcher(env: rankenv.RankEnv, run: _LaunchedRun) -> None:
    """Under torchrun, end with the agent that started this rank (it may be SIGKILLed and not stop us)."""
    import os

    if env.launcher == "torchrun" and os.environ.get("TORCHELASTIC_RUN_ID"):
        from meshlint.smoke import lifeline

        def die() -> None:
            run.cleanup()
            lifeline.die()

        lifeline.watch(die, parent=os.getppid())


def _refused(report, world: int, why: str, static: list) -> dict:
    """The framework stops before any mesh: nothing to launch, and the smoke says why."""
    result = {
        "version": smoke_report.VERSION, "ok": False, "config": report.path, "dialect": report.dialect,
        "framework": dict(getattr(report.spec, "framework", None) or {}) or None, "world_size": world, "backend": None, "device": None, "mode": "none", "launcher": None, "ended": "refused",
        "seconds": 0.0, "timeout": None, "ranks_checked": [], "phases": [], "meshes": {},
        "expected_error": report.resolution.framework_error, "checks": [],
        "failures": [{"phase": "plan", "check": "plan", "ranks": [], "message": why}],
        "warnings": [], "placement": None, "leftover_processes": None, "notes": [], "static_findings": static,
        "step": {"ran": False, "ok": False, "reason": why}, "probe": None,
    }
    return result


def _print(result: dict, fmt: str) -> None:
    from meshlint.report.terminal import emit

    emit(smoke_report.render_json(result) if fmt == "json" else smoke_report.render_text(result))
