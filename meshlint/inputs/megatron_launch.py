"""Megatron-LM launch lines: which commands start an entry script, and the config source one of them makes.

meshlint/inputs/launch.py reads the launcher (torchrun, srun, python, #SBATCH, the script's variables and
arrays) and hands the words after the entry script here (its FRAMEWORK_LAUNCHES hook). ``MegatronSource``
duck-types ``meshlint.inputs.source.Source``: ``data`` holds the options as the parser stores them (by dest),
``locate(dest)`` the script line and word that set each one.
"""

from __future__ import annotations

import os
import re

from meshlint.inputs.launch_words import COMMAND_LINE, Launch

_ENTRY = re.compile(r"(^|/)pretrain_[A-Za-z0-9_]+\.py$")


def recognises(script, as_module: bool) -> bool:
    """An entry script of Megatron-LM (``pretrain_gpt.py``, ``.../pretrain_mamba.py``, ...)."""
    return not as_module and bool(_ENTRY.search(script.text.replace("\\", "/")))


class MegatronLaunch(Launch):
    """One Megatron-LM run: its entry script and the words its parser reads."""

    framework = "megatron"

    def __init__(self, entry: str, args: list, launcher: str, file: str | None, line: int, text: str, entry_col: int):
        super().__init__(None, None, [], [], launcher, file, line, text)
        self.entry = entry            # pretrain_gpt.py (basename)
        self.args = args              # [Word] after the entry script
        self.entry_col = entry_col
        self.env = {"known": False, "cuda_device_max_connections": None, "cuda_device_max_connections_set": False}

    @property
    def display(self) -> str:
        if self.file:
            return f"{self.file}:{self.line}::{self.entry}"
        return f"{COMMAND_LINE}::{self.entry}"

    def __repr__(self) -> str:
        return f"MegatronLaunch({self.entry!r}, {len(self.args)} words, line={self.line})"


def launch(script, args: list, origin, launcher: str, env: dict, first, index0: int) -> MegatronLaunch:
    """The Launch for ``<launcher> ... pretrain_X.py ARGS`` (``first``: the launcher word)."""
    from meshlint.inputs.launch_words import _shown

    text = " ".join([first.text, script.text] + [(_shown(w) if not w.splat else w.raw) for w in args])
    text = text if len(text) <= 200 else text[:197] + "..."
    out = MegatronLaunch(os.path.basename(script.text), list(args), launcher, origin.file, first.line, text, first.col)
    # the environment validate_args reads (arguments.py:951): known only for a script (its exports and the
    # command's own NAME=value words); a command line given to meshlint says nothing about the shell's
    word = env.get("CUDA_DEVICE_MAX_CONNECTIONS")
    out.env = {"known": origin.file is not None,
               "cuda_device_max_connections": (word.text if word.known() else None) if word is not None else None,
               "cuda_device_max_connections_set": word is not None}
    return out


class MegatronSource:
    """A Megatron-LM launch as a config source: options by dest, each located in the script."""

    framework = "megatron"

    def __init__(self, launch: MegatronLaunch, parsed, text: str, comments: list):
        self.launch = launch
        self.parsed = parsed
        self.file = launch.file
        self.path = launch.display
        self.name = os.path.basename(launch.file) if launch.file else COMMAND_LINE
        self.text = text
        self.comments = comments
        self.data = dict(parsed.values)

    def has_key(self, key: str) -> bool:
        return key in self.parsed.given

    def locate(self, key) -> tuple:
        """Line and column of the word that sets ``key`` (a dest; ``a|b``: the first one given); the
        launch line for what the launcher or the parser's defaults decide."""
        if isinstance(key, str) and key.startswith("#L"):  # #L<line>[:<col>]: a position the facts carry
            line, _, col = key[2:].partition(":")
            if line.isdigit():
                return (int(line), int(col) if col.isdigit() else 1)
        if isinstance(key, str):
            for part in key.split("|"):
                given = self.parsed.given.get(part.strip())
                if given is not None:
                    return (given.line, given.col)
        return (self.launch.line, self.launch.entry_col)

    def file_of(self, key, line=None, col=None):
        return self.file or COMMAND_LINE


def make_source(launch: MegatronLaunch) -> MegatronSource:
    """Parse the launch's words and read the script's comments (for ``# meshlint:`` directives)."""
    from meshlint.frameworks.megatron import flags

    table = flags.table()
    extras = tuple(table.get("entries", {}).get(launch.entry, ()))
    parsed = flags.parse(launch.args, launch.entry, extras)
    text, comments = "", []
    if launch.file:
        try:
            with open(launch.file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        comments = _comments(text)
    return MegatronSource(launch, parsed, text, comments)


def _comments(text: str) -> list:
    """(line, col, text after '#') of the script's whole-line comments (never its #! or #SBATCH lines)."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if stripped.startswith("#") and not stripped.startswith(("#!", "#SBATCH")):
            col = len(line) - len(stripped) + 1
            out.append((number, col, stripped[1:]))
    return out
