"""The ``meshlint`` console command and ``python -m meshlint``.

A pre-commit hook runs ``meshlint check FILE...`` on every commit, and click's
import is ~40 ms of the ~80 ms that costs. ``check`` with paths and only its
common flags (meshlint/cli/check_args.py: world size, nodes, GPUs per node,
format, quiet, select/ignore, ...) goes straight to the command's body in
``meshlint.cli.lint``; anything else (another flag, ``--help``, another command)
goes to the click CLI, which calls the same body. tests/test_check_args.py
checks that both ways print the same. ``console`` is the installed command.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) > 1 and argv[0] == "check":
        from meshlint.cli.check_args import parse

        parsed = parse(argv[1:])
        if parsed is not None:
            from meshlint.cli.lint import run_plain

            paths, settings, keywords = parsed
            sys.exit(run_plain(paths, settings, **keywords))
    from meshlint.cli.commands import main as cli

    cli()


def console() -> None:
    """The console command: :func:`main` (meshlint's modules imported by meshlint/fastimport.py, ``check`` with fewer
    garbage collections), then an exit that skips the interpreter's teardown.

    Freeing a short run's modules, rules and schema tables at exit is ~10 % of a first run's CPU time
    and does nothing for the user: once stdout and stderr are flushed (every file meshlint wrote is
    closed by then), the process ends with the exit code. A flush that fails, or an exit with a
    message, takes the ordinary way out, which reports it.
    """
    from meshlint import fastimport

    fastimport.install()  # meshlint's own modules from their bytecode, with less of the import system's work
    if sys.argv[1:2] == ["check"]:
        _fewer_collections()
    try:
        main()
    except SystemExit as exc:
        if exc.code is not None and not isinstance(exc.code, int):
            raise
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            raise exc from None
        os._exit(exc.code or 0)


def _fewer_collections() -> None:
    """Start-up builds tables that live to the end of the run (modules, rules, schemas): at the default 700
    allocations per young collection, the collector walks them again and again while they are built (2.5 % of
    a first run's instructions). So it runs rarely until the first file is checked, then the tables are moved out
    of its way (``gc.freeze``) and the default comes back: each config's cyclic garbage is collected as before,
    and memory stays flat over 10,000 configs."""
    import gc

    from meshlint.cli import lint

    default = gc.get_threshold()

    def settle() -> None:
        gc.freeze()
        gc.set_threshold(*default)

    gc.set_threshold(50_000)
    lint.LOADED.append(settle)
