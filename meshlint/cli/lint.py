"""The body of ``meshlint check``, free of click.

The click command parses the flags and calls :func:`run`; the console entry
point calls it directly for ``meshlint check PATH...`` with only the common
flags (meshlint/cli/check_args.py), which spares every such run click's ~40 ms
import (see ``meshlint/cli/entry.py``). One body, so both ways give the same output.
"""

from __future__ import annotations

import os
import sys

from meshlint.errors import MeshlintError


# Called once, after the first file this process checks (by then everything a check needs is imported and
# loaded): the console command settles the garbage collector there (meshlint/cli/entry.py).
LOADED: list = []


def run(paths: list[str], settings=None, fmt: str = "text", quiet: bool = False,
        diff_base: str | None = None, color: str = "auto", launch=None, fix: bool = False,
        cache: bool = True, show_skips: bool = False) -> int:
    """Check ``paths`` (and a launch given on the command line), print the report, return the
    exit code; MeshlintError is a usage error. ``settings``: a CliSettings, None for the defaults.

    An unchanged TOML config is answered from the results cache (meshlint/cli/results_cache.py) unless
    ``cache`` is off or the run fixes, diffs or checks a launch; the settings and the rules are then
    loaded only for the files that miss, so a fully cached run imports almost nothing.
    """
    from meshlint.engine.filereport import collect_paths, input_kind
    from meshlint.engine.findings import SEVERITY_RANK

    results = None
    if cache and launch is None and not fix and not diff_base:
        from meshlint.cli import results_cache

        results = results_cache.open_cache(settings)
    planner = None
    if results is None or (settings is not None and settings.config):
        planner = _planner(settings)  # as before: a bad --config is reported before anything else
    files = collect_paths(list(paths))
    if not files and launch is None:
        raise MeshlintError("no config files (*.toml, config_registry.py) found in " + ", ".join(paths)
                            + "; a directory is searched for those only: name launch scripts and Accelerate YAML "
                              "files (meshlint check DIR/*.sh DIR/*.yaml)")
    from meshlint.report.stream import ReportStream

    out = ReportStream(fmt, quiet, color, show_skips)  # each report rendered as it comes; out.kept: what the summary reads
    if launch is not None:
        from meshlint.inputs.script_call import ScriptCall

        if isinstance(launch, ScriptCall):  # sbatch/bash SCRIPT ARGS: every launch line of the script, as called
            from meshlint.engine.check import check_all

            options = planner.options_for(launch.path)._replace(script_call=launch)
            launched = check_all(launch.path, options)
        else:
            from meshlint.engine.check import run_checks
            from meshlint.engine.units import analyse_launch

            options = planner.options_for(os.path.join(os.getcwd(), "launch"))
            launched = [run_checks(analyse_launch(launch, options), options)]
        for report in launched:
            report.fail_on = options.fail_on
            out.add(report)
    for path in files:
        options = key = raw = None
        if fmt == "sarif":  # its rule table lists every rule loaded for the files: load them as without a cache
            planner = planner or _planner(settings)
            options = planner.options_for(path)
        if results is not None and input_kind(path) == "toml":
            key, raw, hit = results.lookup(path, need_json=fmt == "json")
            if hit is not None:
                out.add(hit)
                continue
        if options is None:
            planner = planner or _planner(settings)
            options = planner.options_for(path)
        if fix:
            _apply_fixes(path, options)
        from meshlint.engine.check import check_all

        try:
            checked = check_all(path, options, raw)  # raw: the very bytes the cache key was made from
            for report in checked:
                if diff_base and report.status == "checked":
                    _attach_diff(report, options, diff_base)
        except MeshlintError:
            raise  # a usage error (a bad --diff-base revision): the whole run stops, exit 2
        except Exception as exc:  # noqa: BLE001 - one file's failure must not hide the others' reports
            checked = [failed_report(path, exc)]
            key = None  # never cached
        for report in checked:
            report.fail_on = options.fail_on
            piece = out.add(report)
            if results is not None and key is not None and len(checked) == 1:
                results.store(key, report, options.fail_on, piece)
        while LOADED:
            LOADED.pop()()

    reports = out.kept
    if any(r.status == "error" for r in reports):
        code = 2
    elif any(r.fail_on != "never" and r.worst() >= SEVERITY_RANK[r.fail_on] for r in reports):
        code = 1
    else:
        code = 0
    fail_on = settings.fail_on if settings is not None else None
    effective_fail_on = fail_on or (reports[0].fail_on if reports else "error")
    out.finish(code, effective_fail_on, planner.all_rules() if fmt == "sarif" and planner else None)
    if results is not None:
        results.close()
    return code


def _planner(settings):
    from meshlint.cli.settings import CliSettings, Planner

    return Planner(settings if settings is not None else CliSettings())


def guarded(path: str, analyse, *args, **kwargs):
    """``analyse(*args, **kwargs)`` (an analysis or check of the file at ``path``), or, when meshlint
    itself fails on that file, its error report: for explain and diff, as ``run`` does for check."""
    try:
        return analyse(*args, **kwargs)
    except MeshlintError:
        raise
    except Exception as exc:  # noqa: BLE001 - see failed_report
        return failed_report(path, exc)


def guarded_all(path: str, analyse, *args, **kwargs) -> list:
    """:func:`guarded` for a function that returns a list of reports (``check.analyse_all``)."""
    try:
        return analyse(*args, **kwargs)
    except MeshlintError:
        raise
    except Exception as exc:  # noqa: BLE001 - see failed_report
        return [failed_report(path, exc)]


def failed_report(path: str, exc: BaseException):
    """The error report of a file meshlint itself failed on: the run goes on and exits 2.

    Inputs past meshlint's limits are refused before the work (ML007); this is
    the net under that, so that no input ever ends in a traceback.
    """
    from meshlint.errors import INPUT_ERRORS, InputError
    from meshlint.engine.filereport import FileReport

    what = f"{type(exc).__name__}: {str(exc)[:200]}".rstrip(": ")
    if isinstance(exc, (RecursionError, MemoryError)):
        error = InputError("ML007", f"too large or too deeply nested for meshlint to check ({what})")
    else:
        code = "ML008" if "ML008" in INPUT_ERRORS else "ML007"  # ML008 internal-error, where errors.py has it
        error = InputError(code, f"meshlint failed on this file ({what})",
                           help="this is a bug in meshlint: please report it with the file")
    return FileReport(path, "error", error=error)


def run_plain(paths: list[str], settings=None, **keywords) -> int:
    """``meshlint check PATH...`` without click: the flags meshlint/cli/check_args.py parsed (none: the defaults)."""
    try:
        return run(paths, settings, **keywords)
    except MeshlintError as exc:
        fail(str(exc))
    return 2  # not reached: fail() exits


def fail(message: str) -> None:
    """A usage error: one line on stderr, exit 2 (a path or name in it is escaped: it reaches a terminal)."""
    from meshlint.report.terminal import safe

    sys.stdout.flush()
    sys.stderr.write(f"meshlint: error: {safe(message)}\n")
    sys.exit(2)




def _attach_diff(report, options, rev: str) -> None:
    """If the file changed since ``rev``, the diff of its resolved mesh."""
    from meshlint.engine.check import check_file
    from meshlint.report.diff import MeshDiff, read_revision

    file, sep, function = report.path.partition("::")  # a registry config: the file, then its function
    raw = read_revision(file, rev)  # GitError is a MeshlintError: a usage error
    report.diff_base = rev
    if raw is None:
        report.diff_note = f"new since {rev}"
    elif report.source.text.encode() == raw:
        report.diff_note = f"unchanged since {rev}"
    else:
        old = check_file(f"{file}{sep}{function}", options, raw, name=os.path.basename(file))
        old.path = f"{report.path}@{rev}"
        report.diff = MeshDiff(old, report)
        report.diff.base = rev


def _apply_fixes(path: str, options) -> None:
    """``check --fix``: each config's unambiguous fix (meshlint/solve/fix.py), applied before it is checked."""
    from meshlint.solve.fix import fix_path

    try:
        results = fix_path(path, options)
    except MeshlintError as exc:
        sys.stderr.write(f"{path}: not fixed: {exc}\n")
        return
    for result in results:
        if result.applied or result.message.endswith("choose with meshlint fix --set"):
            sys.stderr.write(f"{result.path}: {result.message}\n")
