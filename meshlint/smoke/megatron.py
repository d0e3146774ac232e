"""Megatron-LM's smoke: Megatron-Core's own ``initialize_model_parallel`` builds the groups, compared with meshlint's. [torch]

Megatron has no DeviceMesh: ``parallel_state.initialize_model_parallel`` makes
every group of the world from two RankGenerators (dense and expert) with
``create_group``. That call is wrapped, so the smoke sees every group the
release builds, for every rank (not only the calling rank's), each named by
its ``group_desc``. They are compared with meshlint's arithmetic
(``meshlint.frameworks.megatron.ranks``): every group of every generator, then
this rank's own groups as ``parallel_state`` keeps them, and (real process
groups) an ``all_gather`` and an ``all_reduce`` over each of those. A group
that differs is a failure naming its ranks. Needs megatron-core installed
(tests: ``.frameworks/megatron-core-0.16.1`` on PYTHONPATH).
"""

from __future__ import annotations

import importlib.util

from meshlint.frameworks.megatron import ranks as mranks
from meshlint.smoke.progress import Progress

MODELLED = "0.16.1"  # the release meshlint's resolution models (meshlint.frameworks.megatron.core_0_16)
INSTALL_HINT = (f"the Megatron-LM smoke runs Megatron-Core's own initialize_model_parallel: pip install "
                f"megatron-core=={MODELLED} (no CUDA needed; with --fake, nothing but torch besides)")
FULL_GROUP_LIMIT = 1 << 20  # compare every group of the world up to this many (rank, group) memberships


def missing() -> str | None:
    """Why the Megatron smoke cannot run here, or None. No torch import."""
    try:
        found = importlib.util.find_spec("megatron.core") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else INSTALL_HINT


def note() -> str:
    """Which Megatron-Core ran, from its installed metadata (no import), against the release meshlint models."""
    from importlib import metadata

    try:
        installed = metadata.version("megatron-core")
    except metadata.PackageNotFoundError:
        installed = None
    text = f"Megatron-Core {installed or '(version unknown)'}'s own initialize_model_parallel made the groups"
    if installed != MODELLED:
        text += f"; meshlint models {MODELLED}, so a difference may be the release's"
    return text


def build(plan: dict, steps=None, built: list | None = None) -> dict:
    """Run ``initialize_model_parallel`` on the process group already initialised; returns
    ``{"created": [(group_desc, ranks)], "own": {label: ProcessGroup | None}}``. Raises what Megatron raises."""
    import warnings

    with warnings.catch_warnings():  # its optimizer package warns that Transformer Engine and Apex are absent
        warnings.simplefilter("ignore")
        import megatron.core.parallel_state as ps

    op = plan["recipe"][0]
    created: list = []
    original = ps.create_group

    def recording(ranks=None, *args, **kwargs):
        created.append((kwargs.get("group_desc"), list(ranks) if ranks is not None else None))
        return original(ranks, *args, **kwargs)

    if steps:
        steps("initialize_model_parallel")
    ps.destroy_model_parallel()
    ps.create_group = recording
    try:
        ps.initialize_model_parallel(
            op["tp"], op["pp"], None, context_parallel_size=op["cp"], expert_model_parallel_size=op["ep"],
            expert_tensor_parallel_size=op["etp"], order=op["order"], create_gloo_process_groups=False,
            num_distributed_optimizer_instances=op["distributed_optimizer_instances"])
    finally:
        ps.create_group = original
    if built is not None:
        built.extend(["dense", "expert"])
    own = {label: getattr(ps, glob, None) for _, _, label, glob in mranks.GROUPS}
    return {"created": created, "own": own}


def destroy() -> None:
    import megatron.core.parallel_state as ps

    ps.destroy_model_parallel()


def grids(plan: dict) -> tuple:
    op = plan["recipe"][0]
    return mranks.grids(op["tp"], op["pp"], op["cp"], op["ep"], op["etp"], op["world"], op["order"])


def verify_world(plan: dict, built: dict, prog: Progress) -> None:
    """Every group Megatron created, per kind (its group_desc), against every group of meshlint's generators."""
    dense, expert = grids(plan)
    by_desc: dict = {}
    for desc, members in built["created"]:
        by_desc.setdefault(desc, []).append(members)
    for grid_name, token, label, glob in mranks.GROUPS:
        grid = dense if grid_name == "dense" else expert
        if grid.world > FULL_GROUP_LIMIT:
            prog.check("world_groups", True, axis=label, skipped=f"over {FULL_GROUP_LIMIT} memberships")
            continue
        want = sorted(grid.all_groups(token))
        got = sorted(by_desc.get(glob.lstrip("_"), []))
        ok = want == got
        prog.check("world_groups", ok, axis=label, groups=len(want))
        if not ok:
            extra, lost = [g for g in got if g not in want], [g for g in want if g not in got]
            ranks = sorted({r for g in extra + lost for r in g})
            prog.fail(check="world_groups", axis=label, ranks=ranks, expected=lost[:4], actual=extra[:4],
                      message=f"Megatron-Core's {glob.lstrip('_')} groups differ from meshlint's {grid_name} "
                              f"'{token}' groups: {len(lost)} predicted groups not built (e.g. {lost[:2]}), "
                              f"{len(extra)} built that were not predicted (e.g. {extra[:2]})")


def verify_rank(plan: dict, built: dict, rank: int, prog: Progress, device: str, collectives: bool) -> None:
    """This rank's groups as parallel_state keeps them: members, and over real groups the collectives."""
    import torch.distributed as dist

    from meshlint.smoke.groupcheck import check_group

    dense, expert = grids(plan)
    for grid_name, token, label, glob in mranks.GROUPS:
        grid = dense if grid_name == "dense" else expert
        group = built["own"].get(label)
        if group is None:
            prog.check("members", False, axis=label)
            prog.fail(check="members", axis=label, expected=grid.group(rank, token), actual=None,
                      message=f"rank {rank}: parallel_state has no {glob} after initialize_model_parallel")
            continue
        check_group(prog, label, grid.group(rank, token), group, rank, device,
                    collectives and dist.get_world_size(group) > 1)
    prog.step(None)
