"""Command line: ``meshlint check | explain | rules``.

Start-up time is a feature (pre-commit runs this on every commit), so this
module imports only click; each command imports what it needs. The static
commands never import torch.
"""

from __future__ import annotations

import sys

import click

from meshlint import __version__

FORMATS = ("text", "json")
FAIL_ON = ("error", "warning", "info", "never")
MAX_WORLD = 1 << 24


def _topology_options(func):
    func = click.option("--placement", type=click.Choice(["block", "cyclic"]), default="block", show_default=True,
                        help="How ranks are numbered across nodes: block (SLURM default, torchrun) or cyclic.")(func)
    func = click.option("--gpus-per-node", type=click.IntRange(1, MAX_WORLD), metavar="G",
                        help="GPUs per node, for placement rules.")(func)
    func = click.option("--nodes", type=click.IntRange(1, MAX_WORLD), metavar="N",
                        help="Number of nodes (with --gpus-per-node gives the world size).")(func)
    func = click.option("--world-size", type=click.IntRange(1, MAX_WORLD), metavar="N",
                        help="Number of ranks the config runs on (overrides the file).")(func)
    func = click.option("--dialect", type=click.Choice(["kempnerforge", "torchtitan", "native"]),
                        help="Read every file as this dialect instead of detecting it from its sections.")(func)
    return func


def _cli_topology(world_size, nodes, gpus_per_node, placement):
    from meshlint.topology import CliTopology

    if nodes is not None and gpus_per_node is None:
        raise click.UsageError("--nodes needs --gpus-per-node (the world size is nodes × GPUs per node)")
    if world_size is not None and nodes is not None and world_size != nodes * gpus_per_node:
        raise click.UsageError(f"--world-size {world_size} disagrees with --nodes {nodes} × --gpus-per-node "
                               f"{gpus_per_node} = {nodes * gpus_per_node}")
    return CliTopology(world_size, nodes, gpus_per_node, placement)


def _fail(message: str) -> None:
    click.echo(f"meshlint: error: {message}", err=True)
    sys.exit(2)


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    # click.version_option would look up gettext catalogs on every start-up (~4 ms)
    if value and not ctx.resilient_parsing:
        click.echo(f"meshlint, version {__version__}")
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
def main() -> None:
    """Lint the parallelism configs of large-model training (KempnerForge, torchtitan, native meshes).

    \b
    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it,
                2 usage error, unreadable input or an invalid rule file.
    """


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@_topology_options
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR",
              help="Add the rules in DIR (a user rule pack; repeatable).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="error", show_default=True,
              help="Lowest severity that makes the exit code 1.")
@click.option("-q", "--quiet", is_flag=True, help="Hide info findings and skipped-file notes.")
def check(paths, dialect, world_size, nodes, gpus_per_node, placement, rule_dirs, fmt, fail_on, quiet):
    """Check config files (or directories of them) and report every finding."""
    from meshlint.check import Options, check_file, collect_paths
    from meshlint.errors import MeshlintError
    from meshlint.findings import SEVERITY_RANK
    from meshlint.rules import load_rules

    topology = _cli_topology(world_size, nodes, gpus_per_node, placement)
    try:
        rules = load_rules(tuple(rule_dirs))
    except MeshlintError as exc:
        _fail(str(exc))
    options = Options(rules=rules, dialect=dialect, topology=topology)
    files = collect_paths(list(paths))
    if not files:
        _fail("no TOML files found in " + ", ".join(paths))
    reports = [check_file(path, options) for path in files]

    threshold = None if fail_on == "never" else SEVERITY_RANK[fail_on]
    if any(r.status == "error" for r in reports):
        code = 2
    elif threshold is not None and any(r.worst() >= threshold for r in reports):
        code = 1
    else:
        code = 0
    if fmt == "json":
        from meshlint.report import json_report

        click.echo(json_report.render(reports, code, fail_on))
    else:
        from meshlint.report import text

        click.echo(text.render(reports, quiet))
    sys.exit(code)


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="CONFIG...")
@_topology_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
def explain(paths, dialect, world_size, nodes, gpus_per_node, placement, fmt):
    """Print the mesh(es) each config resolves to: dims, sizes, strides, groups, placement."""
    from meshlint.check import Options, analyse, collect_paths
    from meshlint.report import explain as explain_report

    topology = _cli_topology(world_size, nodes, gpus_per_node, placement)
    options = Options(rules=[], dialect=dialect, topology=topology)
    files = collect_paths(list(paths))
    if not files:
        _fail("no TOML files found in " + ", ".join(paths))
    reports = [analyse(path, options) for path in files]
    if fmt == "json":
        import json

        doc = {"version": 1, "files": [explain_report.explain_json(r) for r in reports]}
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo("\n\n".join(explain_report.render(r) for r in reports))
    sys.exit(2 if any(r.status == "error" for r in reports) else 0)


@main.command("rules")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="Also list the rules in DIR.")
@click.option("--format", "fmt", type=click.Choice(("text", "json", "markdown")), default="text", show_default=True)
def rules_cmd(rule_dirs, fmt):
    """List the rules: code, name, severity, dialects, what each checks."""
    from meshlint.errors import MeshlintError
    from meshlint.report import rules_doc
    from meshlint.rules import load_rules

    try:
        rules = load_rules(tuple(rule_dirs))
    except MeshlintError as exc:
        _fail(str(exc))
    click.echo(rules_doc.render(rules, fmt))
