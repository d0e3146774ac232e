"""The ``meshlint`` console command and ``python -m meshlint``.

A pre-commit hook runs ``meshlint check FILE...`` on every commit, and click's
import is ~40 ms of the ~80 ms that costs. That exact form (``check`` and paths,
no flags) goes straight to the command's body in ``meshlint.lint``; anything
else (a flag, ``--help``, another command) goes to the click CLI, which calls
the same body. tests/test_cli.py checks that both ways print the same.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) > 1 and argv[0] == "check" and not any(a.startswith("-") for a in argv[1:]):
        from meshlint.lint import run_plain

        sys.exit(run_plain(argv[1:]))
    from meshlint.cli import main as cli

    cli()
