"""Click commands ``meshlint suggest`` and ``meshlint fix`` (registered on the main group by meshlint/cli/commands.py).

Like cli.py, this module imports only click at import time; each command imports
what it needs, and nothing here touches torch.
"""

from __future__ import annotations

import sys

import click

from meshlint.cli.options import _options, _planner, _topology_options, _torchtitan_options

FORMATS = ("text", "json")


def _names(values: tuple) -> tuple:
    return tuple(dict.fromkeys(p.strip() for v in values for p in v.split(",") if p.strip()))


def _common(func):
    func = click.option("--isolated", is_flag=True, help="Ignore every configuration file.")(func)
    func = click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
                        help="Use this meshlint.toml or pyproject.toml instead of searching for one.")(func)
    func = click.option("--fabric", metavar="PRESET",
                        help="Inter-node fabric of the cost model: infiniband-ndr (default), infiniband-hdr, "
                             "roce-400, ethernet-100 (overrides [tool.meshlint.cluster] fabric).")(func)
    func = click.option("--node", "node_type", metavar="PRESET",
                        help="Node type of the cost model: 8xH100, 8xH200, 4xH100, 4xH200, 8xA100, 4xA100 "
                             "(default by GPUs per node; overrides [tool.meshlint.cluster] node).")(func)
    func = click.option("--gpu-memory-gib", type=click.FloatRange(1, 10_000), metavar="GIB",
                        help="Memory of one GPU: layouts whose whole estimated peak exceeds it rank last "
                             "(default: the project's gpu_memory_gib, its cluster node preset, else 80).")(func)
    func = click.option("--allow-batch-change", is_flag=True,
                        help="Do not keep the config's global batch: every data-parallel rank keeps its batch as "
                             "written, so the global batch changes with the data-parallel degree (and layouts whose "
                             "ranks cannot split the global batch are listed too); fix then writes degrees only.")(func)
    func = click.option("--vary", multiple=True, metavar="DEGREES",
                        help="Only these degrees may change (comma-separated), e.g. --vary dp_shard,pp.")(func)
    func = click.option("--keep", multiple=True, metavar="DEGREES",
                        help="Keep these degrees at their current values (comma-separated), e.g. --keep tp,pp.")(func)
    return func


def _analysed(path, dialect, world_size, nodes, gpus_per_node, placement, torchtitan_version, torchtitan_root,
              gpu_memory_gib, config_path, isolated):
    from meshlint.engine.check import analyse

    planner = _planner(dialect, world_size, nodes, gpus_per_node, placement, torchtitan_version=torchtitan_version,
                       torchtitan_root=torchtitan_root, gpu_memory_gib=gpu_memory_gib, config=config_path,
                       isolated=isolated)
    options = _options(planner, path)
    report = analyse(path, options)
    if report.status == "error":
        from meshlint.engine.check import input_error_finding
        from meshlint.report.terminal import safe

        f = input_error_finding(report.error)
        click.echo(safe(f"{report.path}:{f.line}:{f.col}: {f.code} [error] {f.message}"), err=True)
        if f.help:
            click.echo(safe(f"  help: {f.help}"), err=True)
        sys.exit(2)
    if report.status != "checked":
        _fail(f"{report.path}: {report.note or 'not a training config'}")
    return planner, options, report


def _profile(planner, path, node_type, fabric, gpus_per_node):
    from meshlint.estimate import cost

    settings = dict(getattr(planner.config_for(path.split("::", 1)[0]), "cluster", None) or {})
    if node_type:
        if node_type not in cost.NODES:
            raise click.BadParameter(f"{node_type!r} is not one of {', '.join(cost.NODES)}", param_hint="--node")
        settings["node"] = node_type
    if fabric:
        if fabric not in cost.FABRICS:
            raise click.BadParameter(f"{fabric!r} is not one of {', '.join(cost.FABRICS)}", param_hint="--fabric")
        settings["fabric"] = fabric
    return cost.cluster(settings, gpus_per_node)


def _fail(message: str) -> None:
    from meshlint.cli.lint import fail

    fail(message)


@click.command("suggest")
@click.argument("path", metavar="CONFIG")
@_topology_options
@_torchtitan_options
@_common
@click.option("--top", type=click.IntRange(1, 1000), default=5, show_default=True, metavar="N",
              help="How many valid layouts to show.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text, or json (docs/suggest-v1.schema.json).")
@click.option("--explain", "explain_k", type=click.IntRange(1, 1000), metavar="K",
              help="Also show alternative K the way `meshlint explain` shows a config, with its check findings.")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Draw the current layout next to alternative 1 (or K of --explain) as an SVG picture.")
def suggest_cmd(path, dialect, world_size, nodes, gpus_per_node, placement, torchtitan_version, torchtitan_root,
                keep, vary, allow_batch_change, gpu_memory_gib, node_type, fabric, config_path, isolated, top, fmt,
                explain_k, svg_path):
    """Rank the valid parallel layouts of CONFIG on a target cluster (default: the config's own).

    \b
    Every assignment of the framework's degrees that passes every error rule, ranked by the
    cost model of docs/cost-model.md (compute, TP/CP/EP/PP/FSDP communication on NVLink or the
    network, pipeline bubble, memory). CONFIG: a TOML config, or a torchtitan registry
    function (file.py::function).
    Exit codes: 0 layouts found, 1 none passes the rules (the output says why), 2 usage error.
    """
    from meshlint.errors import MeshlintError
    from meshlint.report.terminal import emit
    from meshlint.report.suggestion import render_text, svg_pair, to_json
    from meshlint.solve.suggest import alternative_report, search, target_from

    planner, options, report = _analysed(path, dialect, world_size, nodes, gpus_per_node, placement,
                                         torchtitan_version, torchtitan_root, gpu_memory_gib, config_path, isolated)
    try:
        target = target_from(report, keep=_names(keep), vary=_names(vary) or None)
        profile = _profile(planner, path, node_type, fabric, target.gpus_per_node)
        if node_type and not gpu_memory_gib:  # --node's preset is the GPU memory unless --gpu-memory-gib says
            options = options._replace(gpu_memory_gib=round(profile.gpu_memory_gib, 2),
                                       gpu_memory_source=f"--node {node_type}")
        result = search(report, options, target, top=max(top, explain_k or 0), profile=profile,
                        keep_batch=not allow_batch_change)
        if explain_k and explain_k > len(result.alternatives):
            _fail(f"--explain {explain_k}: only {len(result.alternatives)} layout(s) found")
        shown = result
        if len(result.alternatives) > top:
            shown.alternatives = result.alternatives[:max(top, explain_k or 0)]
        if svg_path and result.alternatives:
            svg = svg_pair(result, explain_k or 1, options)
            try:
                with open(svg_path, "w", encoding="utf-8") as f:
                    f.write(svg)
            except OSError as exc:
                _fail(f"cannot write {svg_path}: {exc.strerror or exc}")
            click.echo(f"wrote {svg_path}", err=True)
        if fmt == "json":
            import json

            doc = to_json(shown)
            if explain_k:
                from meshlint.report.explain import explain_json

                doc["explain"] = explain_json(alternative_report(result, explain_k, options))
            emit(json.dumps(doc, indent=2))
        else:
            text = render_text(shown)
            if explain_k:
                from meshlint.report import explain as explain_report
                from meshlint.report.text import render as render_findings

                alt = alternative_report(result, explain_k, options)
                text += "\n\n" + explain_report.render(alt) + "\n" + render_findings([alt], False, use_color=False)
            emit(text)
    except MeshlintError as exc:
        _fail(str(exc))
    sys.exit(0 if result.alternatives else 1)


@click.command("fix")
@click.argument("path", metavar="CONFIG")
@_topology_options
@_torchtitan_options
@_common
@click.option("--pick", type=click.IntRange(1, 1000), metavar="K",
              help="Apply alternative K of `meshlint suggest` (default: 1, the best).")
@click.option("--set", "set_text", metavar="DEG=N,...",
              help="Apply these degrees (e.g. tp=4,pp=2); the other degrees change only as needed, fewest edits first.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the edit as a unified diff; write nothing.")
def fix_cmd(path, dialect, world_size, nodes, gpus_per_node, placement, torchtitan_version, torchtitan_root, keep,
            vary, allow_batch_change, gpu_memory_gib, node_type, fabric, config_path, isolated, pick, set_text,
            show_diff):
    """Write the best valid layout (or --pick K, or --set) into CONFIG, changing only those values.

    \b
    Comments, order and formatting are kept; TOML configs and torchtitan registry functions
    whose degrees are literals. The edited text is read back and must give the same facts with
    the new degrees, else nothing is written; the write is atomic (temporary file + rename).
    Exit codes: 0 written (or nothing to change), 1 no valid layout, 2 usage error or unsafe edit.
    """
    from meshlint.errors import MeshlintError
    from meshlint.solve.fix import apply_plan, parse_set, plan, unified_diff
    from meshlint.report.terminal import emit
    from meshlint.solve.suggest import search, target_from

    if pick and set_text:
        raise click.UsageError("give --pick or --set, not both")
    planner, options, report = _analysed(path, dialect, world_size, nodes, gpus_per_node, placement,
                                         torchtitan_version, torchtitan_root, gpu_memory_gib, config_path, isolated)
    try:
        target = target_from(report, keep=_names(keep), vary=_names(vary) or None)
        profile = _profile(planner, path, node_type, fabric, target.gpus_per_node)
        if node_type and not gpu_memory_gib:  # --node's preset is the GPU memory unless --gpu-memory-gib says
            options = options._replace(gpu_memory_gib=round(profile.gpu_memory_gib, 2),
                                       gpu_memory_source=f"--node {node_type}")
        if set_text:
            from meshlint.engine.search.space import space_for

            fixed = parse_set(set_text, space_for(report.spec).names)
            target = target._replace(fixed=tuple(fixed.items()))
            result = search(report, options, target, top=200, profile=profile, diagnose=True,
                            keep_batch=not allow_batch_change)
            from meshlint.solve.suggest import changes

            ranked = sorted(result.alternatives, key=lambda a: (len(changes(result.solver, a.degrees)), a.rank))
            chosen = ranked[0] if ranked else None
        else:
            k = pick or 1
            result = search(report, options, target, top=k, profile=profile, keep_batch=not allow_batch_change)
            chosen = result.alternatives[k - 1] if len(result.alternatives) >= k else None
        if chosen is None:
            from meshlint.report.suggestion import render_text

            emit(render_text(result))
            click.echo("meshlint fix: no valid layout to apply" + (f" (only {len(result.alternatives)} found)"
                                                                   if result.alternatives else ""), err=True)
            sys.exit(1)
        p = plan(result.solver, chosen.degrees, options, [c for c in chosen.changes if c.get("degree") is None])
        for note in p.notes:
            click.echo(f"note: {note}", err=True)
        if not p.edits:
            click.echo(f"{p.path}: already {' '.join(f'{n}={v}' for n, v in chosen.degrees.items())}: nothing to change",
                       err=True)
            sys.exit(0)
        if show_diff:
            emit(unified_diff(p).rstrip("\n"))
            sys.exit(0)
        apply_plan(p)
        click.echo(f"{p.path}: " + "; ".join(e.what for e in p.edits), err=True)
    except MeshlintError as exc:
        _fail(str(exc))
    sys.exit(0)
