"""The flags several commands share (topology, torchtitan version) and the per-file settings they build.

Imported by meshlint/cli/commands.py and meshlint/cli/suggest.py, so the two command modules import
one way only. Imports only click and the click-free flag tables at start-up.
"""

from __future__ import annotations

import click

from meshlint.cli.check_args import DIALECTS, MAX_WORLD, PLACEMENTS


def _topology_options(func):
    func = click.option("--placement", type=click.Choice(PLACEMENTS), default=None,
                        help="How ranks are numbered across nodes: block (SLURM default, torchrun; the default) "
                             "or cyclic.")(func)
    func = click.option("--gpus-per-node", type=click.IntRange(1, MAX_WORLD), metavar="G",
                        help="GPUs per node, for placement rules.")(func)
    func = click.option("--nodes", type=click.IntRange(1, MAX_WORLD), metavar="N",
                        help="Number of nodes (with --gpus-per-node gives the world size).")(func)
    func = click.option("--world-size", type=click.IntRange(1, MAX_WORLD), metavar="N",
                        help="Number of ranks the config runs on (overrides the file).")(func)
    func = click.option("--dialect", type=click.Choice(DIALECTS),
                        help="Read every file as this dialect instead of detecting it from its sections.")(func)
    return func


def _torchtitan_options(func):
    func = click.option("--torchtitan-root", type=click.Path(file_okay=False), metavar="DIR",
                        help="The torchtitan checkout that registries and --module refer to (default: found from "
                             "the file or the working directory upward, or the installed package).")(func)
    func = click.option("--torchtitan-version", metavar="VERSION", callback=_check_tt_version,
                        help="Read torchtitan configs with this version's semantics: TOML configs 0.1.0 or "
                             "0.2.x, registries 0.3.0 or main@b5bcd76c6 (default: identified from the checkout's "
                             "code, else 0.2.x for TOML; see `meshlint versions`).")(func)
    return func


def _check_tt_version(_ctx, _param, value):
    if value is None:
        return None
    from meshlint.frameworks import versions

    canonical = versions.canonical("torchtitan", value, strict=False)
    if canonical is None:
        raise click.BadParameter(f"{value!r} is not a torchtitan version meshlint models "
                                 f"({', '.join(versions.ids('torchtitan'))})")
    return canonical


def _cli_topology(world_size, nodes, gpus_per_node, placement):
    """Validate the topology flags (and build them for callers that need no project config)."""
    from meshlint.mesh.topology import CliTopology

    if nodes is not None and gpus_per_node is None:
        raise click.UsageError("--nodes needs --gpus-per-node (the world size is nodes × GPUs per node)")
    if world_size is not None and nodes is not None and world_size != nodes * gpus_per_node:
        raise click.UsageError(f"--world-size {world_size} disagrees with --nodes {nodes} × --gpus-per-node "
                               f"{gpus_per_node} = {nodes * gpus_per_node}")
    if nodes is not None and nodes * gpus_per_node > MAX_WORLD:
        raise click.UsageError(f"--nodes {nodes} × --gpus-per-node {gpus_per_node} = {nodes * gpus_per_node:,} "
                               f"ranks: more than {MAX_WORLD:,}")
    return CliTopology(world_size, nodes, gpus_per_node, placement)


def _fail(message: str) -> None:
    from meshlint.cli.lint import fail

    fail(message)


def _selectors(values: tuple) -> tuple:
    return tuple(part.strip() for v in values for part in v.split(",") if part.strip())


def _planner(dialect, world_size, nodes, gpus_per_node, placement, **extra):
    """CLI flags + the project configuration that governs each file."""
    from meshlint.errors import MeshlintError
    from meshlint.cli.settings import CliSettings, Planner

    _cli_topology(world_size, nodes, gpus_per_node, placement or "block")  # validates the combination
    try:
        return Planner(CliSettings(dialect, world_size, nodes, gpus_per_node, placement, **extra))
    except MeshlintError as exc:
        _fail(str(exc))


def _options(planner, path: str):
    from meshlint.errors import MeshlintError

    try:
        return planner.options_for(path)
    except MeshlintError as exc:
        _fail(str(exc))
