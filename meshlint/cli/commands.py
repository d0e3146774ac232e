"""Command line: ``meshlint check | explain | rules``.

Start-up time is a feature (pre-commit runs this on every commit), so this
module imports only click; each command imports what it needs. The static
commands never import torch.
"""

from __future__ import annotations

import os
import sys

import click

from meshlint import __version__

from meshlint.cli.check_args import CHECK_FORMATS, COLORS, DIALECTS, FAIL_ON
from meshlint.cli.options import (
    _cli_topology,
    _fail,
    _options,
    _planner,
    _selectors,
    _topology_options,
    _torchtitan_options,
)

FORMATS = ("text", "json")


def _launch(module, config_name, overrides):
    """``--module M --config F -- OVERRIDES``: a torchtitan run given the way its launcher takes it."""
    from meshlint.errors import InputError
    from meshlint.inputs.launch import parse_launch_args

    argv = ["--module", module, "--config", config_name, *overrides]
    try:
        return parse_launch_args(argv)
    except InputError as exc:
        _fail(f"the launch line: {exc.message}" + (f" ({exc.help})" if exc.help else ""))


_LAUNCHERS = ("torchrun", "srun", "run_train.sh", "env", "python", "python3", "uv", "nohup", "exec", "accelerate",
              "accelerate-launch", "sbatch", "bash", "sh")


def _is_command(word: str) -> bool:
    """A launch command given in place of paths (``torchrun ...``, ``NGPU=8 ./run_train.sh ...``)."""
    import os

    if os.path.exists(word):
        return False
    name = word.rsplit("/", 1)[-1]
    return name in _LAUNCHERS or name.startswith("python") or ("=" in word and not word.startswith("-"))


def _command_launch(argv):
    """A launch command given in place of paths, parsed: a ScriptCall (``sbatch``/``bash SCRIPT ARGS``: the
    script read as called), an Accelerate launch (its own grammar), or a torchtitan/KempnerForge/Megatron
    launch. Exits 2 with the parser's message where the command is refused."""
    from meshlint.errors import InputError
    from meshlint.inputs.accelerate_launch import parse_argv, start_of
    from meshlint.inputs.launch import parse_launch_args
    from meshlint.inputs.script_call import call_from_argv

    try:
        script = call_from_argv(list(argv))
        if script is not None:
            return script
        if start_of([_Word(p) for p in argv]) is not None:
            return parse_argv(list(argv))
        return parse_launch_args(list(argv))
    except InputError as exc:
        _fail(f"the launch line: {exc.message}" + (f" ({exc.help})" if exc.help else ""))


class _Word:
    def __init__(self, text: str):
        self.text = text


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    # click.version_option would look up gettext catalogs on every start-up (~4 ms)
    if value and not ctx.resilient_parsing:
        click.echo(f"meshlint, version {__version__}")
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
def main() -> None:
    """Lint the parallelism configs of large-model training (KempnerForge, torchtitan, Hugging Face Accelerate,
    Megatron-LM and Megatron-Bridge, native meshes).

    \b
    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it,
                2 usage error, unreadable input or an invalid rule file.
    """


@main.command()
@click.argument("paths", nargs=-1, metavar="PATH...")
@_topology_options
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR",
              help="Add the rules in DIR (a user rule pack; repeatable).")
@click.option("--select", multiple=True, metavar="RULES",
              help="Run only these rules: codes, code prefixes (ML2) or names, comma-separated. Replaces the configured select.")
@click.option("--extend-select", multiple=True, metavar="RULES", help="Also run these rules.")
@click.option("--ignore", multiple=True, metavar="RULES", help="Do not run these rules.")
@click.option("--format", "fmt", type=click.Choice(CHECK_FORMATS), default="text", show_default=True,
              help="text; json (versioned); sarif (GitHub code scanning); github (workflow annotations).")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None,
              help="Lowest severity that makes the exit code 1 (default: error, or the project's lint.fail-on).")
@click.option("-q", "--quiet", is_flag=True, help="Hide info findings and skipped-file notes.")
@click.option("--show-skips", "--verbose", "show_skips", is_flag=True,
              help="List every skip note (a rule that did not run for lack of the world size or node size, a value "
                   "not statically readable) instead of one summary line; JSON and SARIF always list them.")
@click.option("--diff-base", metavar="REV",
              help="Also show how each config's resolved mesh changed since git revision REV.")
@click.option("--report-unused-suppressions", "report_unused", is_flag=True,
              help="Report '# meshlint: ignore[...]' comments that suppress nothing (ML901).")
@click.option("--config", "config_path", metavar="FILE|FUNCTION",
              help="Use this meshlint.toml or pyproject.toml instead of searching for one; with --module, the "
                   "torchtitan config function instead (as torchtitan's launcher takes it).")
@click.option("--meshlint-config", "meshlint_config", type=click.Path(dir_okay=False), metavar="FILE",
              help="Use this meshlint.toml or pyproject.toml (the same as --config without --module).")
@click.option("--module", "tt_module", metavar="MODULE",
              help="Check a torchtitan run given as its launcher takes it: --module llama3 --config llama3_70b "
                   "-- --parallelism.tensor_parallel_degree 8 (overrides after --).")
@_torchtitan_options
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--gpu-memory-gib", type=click.FloatRange(1, 10_000), metavar="GIB",
              help="Memory of one GPU for the model-state estimate (ML504; default 80, or the project's gpu_memory_gib).")
@click.option("--color", type=click.Choice(COLORS), default="auto", show_default=True,
              help="Colour text output (auto: on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it).")
@click.option("--smoke", is_flag=True,
              help="Then build each config's mesh for real and verify it (meshlint smoke, with its defaults).")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Check every file afresh: neither read nor write the results cache (MESHLINT_NO_CACHE=1 turns "
                   "off every cache).")
@click.option("--fix", "apply_fixes", is_flag=True,
              help="First apply each config's unambiguous fix of its error findings (one degree whose one value "
                   "makes every error rule pass; see `meshlint fix`), then report what is left.")
def check(paths, dialect, world_size, nodes, gpus_per_node, placement, rule_dirs, select, extend_select, ignore,
          fmt, fail_on, quiet, show_skips, diff_base, report_unused, config_path, meshlint_config, tt_module,
          torchtitan_root, torchtitan_version, isolated, gpu_memory_gib, color, smoke, no_cache, apply_fixes):
    """Check config files (or directories of them) and report every finding.

    \b
    PATH: TOML configs, torchtitan registries (config_registry.py, any .py, or file.py::function),
    Megatron-Bridge recipes (.py), Accelerate config files (.yaml), launch scripts (.sh, .sbatch,
    .slurm: torchtitan, KempnerForge, Accelerate, Megatron-LM, Bridge's run_recipe.py), configs saved
    with --debug.save_config_file (.json), or directories (searched for *.toml and config_registry.py).
    Or, after --, a launch command: torchrun/srun/python ... (its overrides checked as the framework
    reads them), or sbatch/bash JOB.sh ARGS (the script read with $1 "$@" bound to ARGS).
    """
    from meshlint.errors import MeshlintError
    from meshlint.cli.lint import run
    from meshlint.cli.settings import CliSettings

    _cli_topology(world_size, nodes, gpus_per_node, placement or "block")  # validates the combination
    launch = None
    if tt_module is not None:
        if config_path is None:
            raise click.UsageError("--module needs --config FUNCTION (the torchtitan config to run)")
        launch, config_path, paths = _launch(tt_module, config_path, paths), meshlint_config, ()
    elif not paths:
        raise click.UsageError("give PATH... (or a torchtitan launch: --module M --config F -- OVERRIDES)")
    elif _is_command(paths[0]):  # meshlint check -- torchrun --nproc_per_node 8 -m torchtitan.train ...
        launch = _command_launch(paths)
        paths, config_path = (), config_path or meshlint_config
    else:
        config_path = config_path or meshlint_config
    settings = CliSettings(dialect, world_size, nodes, gpus_per_node, placement, rule_dirs=tuple(rule_dirs),
                           select=_selectors(select) or None, extend_select=_selectors(extend_select),
                           ignore=_selectors(ignore), fail_on=fail_on, report_unused=report_unused,
                           config=config_path, isolated=isolated, gpu_memory_gib=gpu_memory_gib,
                           torchtitan_version=torchtitan_version, torchtitan_root=torchtitan_root)
    if smoke and fmt != "text":
        raise click.UsageError("--smoke prints text reports; for the smoke's JSON use `meshlint smoke --format json`")
    try:
        code = run(list(paths), settings, fmt=fmt, quiet=quiet, diff_base=diff_base, color=color, launch=launch,
                   fix=apply_fixes, cache=not no_cache, show_skips=show_skips)
        if smoke:
            code = max(code, _smoke_each(list(paths), settings))
    except MeshlintError as exc:
        _fail(str(exc))
    sys.exit(code)


def _smoke_each(paths: list, settings) -> int:
    """``check --smoke``: the smoke of every checked config, after the check's report."""
    from meshlint.engine.check import collect_paths
    from meshlint.cli.settings import Planner
    from meshlint.smoke.run import SmokeOptions, smoke

    from meshlint.engine.check import analyse_all

    planner = Planner(settings)
    worst = 0
    for path in collect_paths(paths):
        options = planner.options_for(path)
        for report in analyse_all(path, options):  # a registry: each of its config functions
            if report.status == "checked":
                # a launch in a script is named file:LINE::entry, which only its file reads back as
                target = report.path if os.path.exists(str(report.path).split("::")[0]) else path
                worst = max(worst, smoke(target, options, SmokeOptions()))
    return worst


@main.command("smoke")
@click.argument("path", metavar="CONFIG")
@_topology_options
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: CUDA when this host has a GPU per rank, else CPU processes.")
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True,
              help="auto: nccl on CUDA, gloo on CPU.")
@click.option("--fake", is_flag=True,
              help="One process, torch's fake process group, the full world: build the meshes as sample ranks.")
@click.option("--rank", "ranks", type=click.IntRange(0), multiple=True, metavar="N",
              help="With --fake: the ranks to build as (repeatable; default first, middle, last).")
@click.option("--memory", is_flag=True,
              help="With --fake: build the framework's own model at full size on fake tensors and measure one "
                   "step's peak per chosen rank (default rank 0), beside meshlint's estimate. torchtitan v0.2 "
                   "and KempnerForge TOMLs without pp/ep/cp; others exit 3.")
@click.option("--kempnerforge-root", type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="With --memory: the KempnerForge checkout whose model is built (default: the installed package).")
@click.option("--gpu-memory-gib", type=click.FloatRange(1, 10_000), metavar="GIB",
              help="With --memory: the GPU's memory a measured peak must fit (default 80, or the project's).")
@click.option("--timeout", type=click.FloatRange(1, 86_400), default=300, show_default=True, metavar="S",
              help="End the whole run if it has not finished after S seconds (naming the phase and the ranks).")
@click.option("--no-step", "no_step", is_flag=True,
              help="Check the mesh only: skip the FSDP+TP+PP+EP training step and the collective probe.")
@click.option("--scale-to", type=click.IntRange(1, 1 << 24), metavar="N",
              help="Run on N ranks, shrinking only the data-parallel dims (tp, pp, ep, cp kept, and etp where the "
                   "framework version has it).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No live progress on stderr.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Use this meshlint.toml or pyproject.toml instead of searching for one.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@_torchtitan_options
def smoke_cmd(path, dialect, world_size, nodes, gpus_per_node, placement, device, backend, fake, ranks, memory,
              kempnerforge_root, gpu_memory_gib, timeout, no_step, scale_to, fmt, quiet, config_path, isolated, torchtitan_version,
              torchtitan_root):
    """Build CONFIG's DeviceMesh for real on every rank and verify it against the static prediction.

    \b
    Started by torchrun or srun, this process is one rank of the run; otherwise
    it launches the whole world on this host with torch's elastic agent. After
    the mesh checks every rank runs one FSDP2+TP+PP+EP training step of a tiny
    model and compares it with the same model unsharded.
    With --fake --memory it also measures one training step's peak memory
    of the framework's own model at full size, per chosen rank, on CPU.
    Exit codes: 0 verified, 1 a mismatch, crash, hang or rank outside the mesh
                (--memory: a peak over the GPU, a rank not measured),
                2 usage error (no world size, no torch, a bad launcher variable),
                3 --memory does not measure this config yet,
                128 + the signal when stopped (130 Ctrl-C, 143 SIGTERM).
    """
    from meshlint.errors import MeshlintError
    from meshlint.cli.settings import CliSettings, Planner
    from meshlint.smoke.run import SmokeOptions, smoke

    if ranks and not fake:
        raise click.UsageError("--rank picks the ranks of a --fake smoke; a real smoke runs every rank")
    if memory and not fake:
        raise click.UsageError("--memory measures on fake tensors: add --fake (a real run's peak is in its step's "
                               "peak_memory_mb)")
    if memory and scale_to:
        raise click.UsageError("--memory measures the config at its own full scale: drop --scale-to")
    if kempnerforge_root and not memory:
        raise click.UsageError("--kempnerforge-root is where --memory builds KempnerForge's model: add --memory")
    if gpu_memory_gib and not memory:
        raise click.UsageError("--gpu-memory-gib is the capacity a --memory measurement must fit: add --memory")
    _cli_topology(world_size, nodes, gpus_per_node, placement or "block")
    settings = CliSettings(dialect, world_size, nodes, gpus_per_node, placement, config=config_path,
                           isolated=isolated, torchtitan_version=torchtitan_version, torchtitan_root=torchtitan_root,
                           gpu_memory_gib=gpu_memory_gib)
    opts = SmokeOptions(device=device, backend=backend, fake=fake, ranks=tuple(ranks), timeout=timeout, fmt=fmt,
                        step=not no_step, scale_to=scale_to, quiet=quiet, memory=memory,
                        kempnerforge_root=kempnerforge_root)
    from meshlint.smoke.memory import UNSUPPORTED_EXIT, Unsupported

    try:
        sys.exit(smoke(path, Planner(settings).options_for(path), opts))
    except Unsupported as exc:
        click.echo(f"meshlint: not measured: {exc}", err=True)
        sys.exit(UNSUPPORTED_EXIT)
    except MeshlintError as exc:
        _fail(str(exc))


def _parse_coords(text: str) -> dict:
    out = {}
    for part in text.replace(" ", "").split(","):
        dim, eq, index = part.partition("=")
        digits = index[1:] if index.startswith("-") else index
        # ASCII digits, at most 18: str.isdigit() accepts '²', which int() refuses, and int() refuses 4,300+ digits
        if not eq or not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
            raise click.BadParameter(f"{part!r} is not dim=index (e.g. pp=1,dp_shard=0,tp=3)", param_hint="--coords")
        out[dim] = int(index)
    return out


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="CONFIG...")
@_topology_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--rank", "ranks", type=click.IntRange(0), multiple=True, metavar="N",
              help="Coordinates of rank N and the members of each of its groups (repeatable).")
@click.option("--coords", "coords_text", metavar="DIM=I,...",
              help="The reverse: the rank at these coordinates (e.g. pp=1,dp_shard=0,tp=3).")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Also draw the mesh on the nodes as an SVG picture (one config only).")
@_torchtitan_options
def explain(paths, dialect, world_size, nodes, gpus_per_node, placement, fmt, ranks, coords_text, svg_path,
            torchtitan_version, torchtitan_root):
    """Print the mesh(es) each config resolves to: dims, sizes, strides, groups, placement.

    A registry file explains each of its config functions; file.py::function picks one.
    """
    from meshlint.engine.check import analyse_all, collect_paths
    from meshlint.report import explain as explain_report

    planner = _planner(dialect, world_size, nodes, gpus_per_node, placement,
                       torchtitan_version=torchtitan_version, torchtitan_root=torchtitan_root)
    coords = _parse_coords(coords_text) if coords_text else None
    if _is_command(paths[0]):  # meshlint explain -- torchrun ... pretrain_gpt.py ... (a launch line)
        import os

        from meshlint.inputs.script_call import ScriptCall
        from meshlint.engine.units import analyse_launch

        launch = _command_launch(paths)
        if isinstance(launch, ScriptCall):
            reports = analyse_all(launch.path, _options(planner, launch.path)._replace(script_call=launch))
        else:
            reports = [analyse_launch(launch, _options(planner, os.path.join(os.getcwd(), "launch")))]
    else:
        files = collect_paths(list(paths))
        if not files:
            _fail("no config files (*.toml, config_registry.py) found in " + ", ".join(paths)
                            + "; a directory is searched for those only: name launch scripts and Accelerate YAML "
                              "files (meshlint check DIR/*.sh DIR/*.yaml)")
        from meshlint.cli.lint import guarded_all

        reports = [report for path in files for report in guarded_all(path, analyse_all, path,
                                                                       _options(planner, path))]
    if svg_path and len(reports) != 1:
        raise click.UsageError("--svg draws one config; give exactly one CONFIG (file.py::function for a registry)")
    try:
        views = [explain_report.RankView(r, ranks, coords) for r in reports]
    except ValueError as exc:
        _fail(str(exc))
    if svg_path:
        _write_svg(reports[0], svg_path)
    if fmt == "json":
        import json

        from meshlint.report.json_report import dumps

        doc = {"version": 1, "files": [explain_report.explain_json(r, v) for r, v in zip(reports, views)]}
        click.echo(dumps(doc))
    else:
        click.echo("\n\n".join(explain_report.render(r, v) for r, v in zip(reports, views)))
    sys.exit(2 if any(r.status == "error" for r in reports) else 0)


def _write_svg(report, path: str) -> None:
    from meshlint.report.svg import render_svg

    res = report.resolution if report.status == "checked" else None
    if res is None or not res.axes or not res.world_used:
        _fail(f"{report.path}: no resolved mesh to draw (see `meshlint explain {report.path}`)")
    if not report.topology.gpus_per_node:
        _fail("--svg needs the node size: pass --gpus-per-node (or add '# meshlint: gpus_per_node=G')")
    mesh = res.mesh or next((m for m in res.meshes.values() if m), None)
    svg = render_svg(report.path, res.axes, res.world_used, report.topology.gpus_per_node,
                     report.topology.placement, covered=mesh.size if mesh else None)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")
    click.echo(f"wrote {path}", err=True)


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="OLD [NEW]")
@_topology_options
@click.option("--rev", metavar="REV", help="Compare CONFIG with its version at git revision REV.")
@click.option("--rank", "ranks", type=click.IntRange(0), multiple=True, metavar="N",
              help="Show these ranks (default: the first, a middle one and the last).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@_torchtitan_options
def diff(paths, dialect, world_size, nodes, gpus_per_node, placement, rev, ranks, fmt, torchtitan_version,
         torchtitan_root):
    """Show what a config edit does to the resolved mesh and the ranks.

    \b
    meshlint diff old.toml new.toml
    meshlint diff --rev HEAD~1 configs/x.toml
    Exit codes: 0 same mesh, 1 different, 2 error.
    """
    import os

    from meshlint.engine.check import check_file
    from meshlint.report.diff import GitError, MeshDiff, read_revision
    from meshlint.cli.lint import guarded

    if rev and len(paths) != 1:
        raise click.UsageError("with --rev give one CONFIG (its old version is read from git)")
    if not rev and len(paths) != 2:
        raise click.UsageError("give OLD and NEW, or --rev REV and one CONFIG")
    planner = _planner(dialect, world_size, nodes, gpus_per_node, placement,
                       torchtitan_version=torchtitan_version, torchtitan_root=torchtitan_root)
    options = _options(planner, paths[-1].split("::", 1)[0])
    if rev:
        new_path = paths[0]
        file, sep, function = new_path.partition("::")  # a registry config: file.py::function
        try:
            raw = read_revision(file, rev)
        except GitError as exc:
            _fail(str(exc))
        if raw is None:
            _fail(f"{file} does not exist at {rev}")
        old_label = f"{new_path}@{rev}"
        old = guarded(new_path, check_file, new_path, options, raw, name=os.path.basename(file))
        old.path = old_label
    else:
        old_label, new_path = paths
        old = guarded(old_label, check_file, old_label, options)
    new = guarded(new_path, check_file, new_path, options)
    result = MeshDiff(old, new, tuple(ranks))
    if fmt == "json":
        import json

        from meshlint.report.json_report import dumps

        click.echo(dumps(result.to_json()))
    else:
        click.echo(result.render(old_label, new_path))
    for report in (old, new):
        if report.status != "checked":
            sys.exit(2)
    sys.exit(0 if result.same else 1)


@main.command("rules")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="Also list the rules in DIR.")
@click.option("--format", "fmt", type=click.Choice(("text", "json", "markdown")), default="text", show_default=True)
def rules_cmd(rule_dirs, fmt):
    """List the rules: code, name, severity, dialects, what each checks."""
    from meshlint.errors import MeshlintError
    from meshlint.report import rules_doc
    from meshlint.engine.ruleset import load_rules

    try:
        rules = load_rules(tuple(rule_dirs))
    except MeshlintError as exc:
        _fail(str(exc))
    click.echo(rules_doc.render(rules, fmt))


@main.command("schema")
@click.option("--dialect", type=click.Choice(DIALECTS), required=True)
def schema_cmd(dialect):
    """Print a JSON Schema (draft 4) of a dialect's config, for taplo / Even Better TOML."""
    import json

    from meshlint.report.schema_export import schema

    click.echo(json.dumps(schema(dialect), indent=2))


@main.command("versions")
@click.option("--torchtitan-root", type=click.Path(file_okay=False), metavar="DIR",
              help="Also say which modelled semantics the torchtitan checkout (or installed package) at DIR has, "
                   "and how that was decided from its code.")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def versions_cmd(torchtitan_root, fmt):
    """List the framework versions meshlint models: the id to pass (--torchtitan-version, a rule's
    frameworks), the commit or release, its date, and what it covers."""
    import json

    from meshlint.frameworks import versions

    rows = [{"framework": e.framework, "version": e.version, "id": f"{e.framework}@{e.version}", "commit": e.commit,
             "date": e.date, "aliases": list(e.aliases), "description": e.description} for e in versions.VERSIONS]
    found = None
    if torchtitan_root is not None:
        version, evidence = versions.identify(torchtitan_root)
        found = {"root": torchtitan_root, "version": version, "decided_by": evidence}
    if fmt == "json":
        click.echo(json.dumps({"version": 1, "versions": rows, **({"torchtitan_root": found} if found else {})},
                              indent=2))
        return
    for row in rows:
        also = f" (also: {', '.join(row['aliases'])})" if row["aliases"] else ""
        click.echo(f"{row['id']:<28} {row['commit']:<11} {row['date']}  {row['description']}{also}")
    if found:
        said = found["version"] or "no modelled version"
        click.echo(f"\n{torchtitan_root}: torchtitan {said}: {found['decided_by']}")


# meshlint suggest / meshlint fix live in meshlint/cli/suggest.py (it imports the helpers above)
from meshlint.cli.suggest import fix_cmd, suggest_cmd  # noqa: E402

main.add_command(suggest_cmd)
main.add_command(fix_cmd)
