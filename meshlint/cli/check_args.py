"""The common flags of ``meshlint check``, parsed without click (~40 ms to import, most of a warm run).

``parse`` reads an argument list made only of paths and the flags in ``OPTIONS``, with values click
would accept unchanged; anything else (``--help``, ``--rules``, ``--config``, ``--``, an unknown or
misspelt flag, a value click would convert or refuse, a launch line, a topology click refuses)
returns None, and the entry point hands the whole line to click, which gives the answer, the
message or the error. So both ways print the same (tests/test_check_args.py runs each case both
ways), and click stays the one definition of the command. To make a new flag of ``check`` fast,
add it to ``OPTIONS`` with its ``CliSettings`` field or ``lint.run`` keyword (``RUN_KEYWORDS``);
the test compares the table with click's declaration of the command.
"""

from __future__ import annotations

import os

MAX_WORLD = 1 << 24
CHECK_FORMATS = ("text", "json", "sarif", "github")
FAIL_ON = ("error", "warning", "info", "never")
PLACEMENTS = ("block", "cyclic")
COLORS = ("auto", "always", "never")


class _DialectChoices:
    """The ``--dialect`` choices: the ``cli_choice`` rows of meshlint/frameworks/registry.py, read there on first
    use (a tuple's equality, iteration and membership), so a run without ``--dialect`` never imports the registry."""

    _names: tuple | None = None

    def names(self) -> tuple:
        if self._names is None:
            from meshlint.frameworks.registry import FRAMEWORKS

            self._names = tuple(f.name for f in FRAMEWORKS if f.cli_choice)
        return self._names

    def __iter__(self):
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, index):
        return self.names()[index]

    def __contains__(self, value) -> bool:
        return value in self.names()

    def __eq__(self, other) -> bool:
        return self.names() == (other.names() if isinstance(other, _DialectChoices) else other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self.names())


DIALECTS = _DialectChoices()

# flag -> (destination, kind): "flag" (a boolean), "count" (1 to MAX_WORLD), "list" (repeatable, comma-separated
# selectors), or the choices (a tuple, or DIALECTS). Destinations are CliSettings fields, or lint.run's keywords
# (RUN_KEYWORDS).
OPTIONS = {
    "--world-size": ("world_size", "count"),
    "--nodes": ("nodes", "count"),
    "--gpus-per-node": ("gpus_per_node", "count"),
    "--placement": ("placement", PLACEMENTS),
    "--dialect": ("dialect", DIALECTS),
    "--select": ("select", "list"),
    "--extend-select": ("extend_select", "list"),
    "--ignore": ("ignore", "list"),
    "--fail-on": ("fail_on", FAIL_ON),
    "--report-unused-suppressions": ("report_unused", "flag"),
    "--isolated": ("isolated", "flag"),
    "--format": ("fmt", CHECK_FORMATS),
    "-q": ("quiet", "flag"),
    "--quiet": ("quiet", "flag"),
    "--show-skips": ("show_skips", "flag"),
    "--verbose": ("show_skips", "flag"),
    "--color": ("color", COLORS),
    "--no-cache": ("cache", "flag"),  # stored inverted below
}
RUN_KEYWORDS = ("fmt", "quiet", "color", "cache", "show_skips")


def parse(argv: list) -> tuple | None:
    """(paths, CliSettings, lint.run keywords) for a ``check`` line of common flags only, else None (click)."""
    paths, values, lists = [], {}, {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-"):
            paths.append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        spec = OPTIONS.get(name)
        if spec is None:
            return None
        dest, kind = spec
        if kind == "flag":
            if eq:
                return None
            values[dest] = True
            continue
        if not eq:
            if i == len(argv) or argv[i].startswith("-"):
                return None  # click's own error, or a value that looks like a flag: click decides
            value = argv[i]
            i += 1
        if kind == "list":
            lists.setdefault(dest, []).append(value)
        elif kind == "count":
            # plain decimal only: click's int() would also take "+8", " 8", "0_8" (and refuse others) itself
            if not (value.isascii() and value.isdigit() and value[0] != "0" and int(value) <= MAX_WORLD):
                return None
            values[dest] = int(value)
        elif value in kind:
            values[dest] = value
        else:
            return None
    if not paths or not os.path.exists(paths[0]):
        return None  # no path, or a launch line (``torchrun ...``): click's command tells them apart
    nodes, gpus, world = values.get("nodes"), values.get("gpus_per_node"), values.get("world_size")
    if nodes is not None and (gpus is None or nodes * gpus > MAX_WORLD or world not in (None, nodes * gpus)):
        return None  # a topology click refuses, with its message
    run = {key: values.pop(key) for key in RUN_KEYWORDS if key in values}
    if "cache" in run:
        run["cache"] = False
    for dest, items in lists.items():
        values[dest] = tuple(part.strip() for item in items for part in item.split(",") if part.strip())
    if "select" in values:
        values["select"] = values["select"] or None
    from meshlint.cli.cli_settings import CliSettings

    return paths, CliSettings(**values), run
