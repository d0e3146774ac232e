"""The grammar of ``accelerate launch``: which of a command's words are Accelerate's flags (by the release's
generated flag table: ``--x_y``, ``--x-y``, ``--x=v``, unique prefixes as argparse takes them), the training
script and its arguments, and the ``PARALLELISM_CONFIG_*`` variables the command inherits or sets.

The words come expanded from the script reader (meshlint/inputs/scripts.py) or from meshlint's command line
(``meshlint check -- accelerate launch ...``); this module only reads them.
"""

from __future__ import annotations

import os
import re

from meshlint.errors import InputError
from meshlint.inputs.launch_words import PerTaskOnce, UNKNOWN_CHAR

_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
ENV_PREFIX = "PARALLELISM_CONFIG_"
ENV_SWITCH = "ACCELERATE_USE_PARALLELISM_CONFIG"


class AccelerateLaunch:
    """One ``accelerate launch`` command."""

    def __init__(self, file: str | None, line: int, col: int, text: str):
        self.file = file
        self.line = line
        self.col = col
        self.text = text
        self.flags: dict = {}         # flag name (underscores) -> Word of its value (a switch: Word "true")
        self.env: dict = {}           # PARALLELISM_CONFIG_* / ACCELERATE_USE_PARALLELISM_CONFIG -> Word
        self.script: str | None = None
        self.script_args: list = []   # the training script's own arguments (texts)
        self.notes: list = []
        self.hints: list = []
        self.error: InputError | None = None
        self.srun = False             # srun starts it (the script's shell expanded its words once for all tasks)
        self.rank_once: str | None = None  # --machine_rank from a per-task Slurm variable that shell expanded

    @property
    def display(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "accelerate launch"

    def __repr__(self) -> str:
        return f"AccelerateLaunch(line={self.line}, flags={sorted(self.flags)}, env={sorted(self.env)})"


def _flag_table(version: str | None = None) -> dict:
    from meshlint.frameworks.accelerate import version_module

    return version_module(version).facts()["flags"]


def start_of(words: list) -> int | None:
    """Index of the word after ``accelerate launch`` (``accelerate-launch``, ``python -m
    accelerate.commands.launch``), or None when the command is not one."""
    for i, w in enumerate(words):
        base = os.path.basename(w.text)
        if base == "accelerate" and i + 1 < len(words) and words[i + 1].text == "launch":
            return i + 2
        if base == "accelerate-launch":
            return i + 1
        if w.text == "-m" and i + 1 < len(words) and words[i + 1].text == "accelerate.commands.launch":
            return i + 2
    return None


def from_words(words: list, file: str | None, env: dict | None = None, version: str | None = None,
               refused: list | None = None):
    """The AccelerateLaunch of a command's expanded words (``env``: name -> Word the command inherits),
    or None when the command does not run ``accelerate launch`` or cannot be read (``refused`` gets the
    undetermined word that stands where flags may be)."""
    start = start_of(words)
    if start is None:
        return None
    first = words[start - 1]
    launch = AccelerateLaunch(file, first.line, first.col, " ".join(w.text for w in words)[:200])
    for name, word in (env or {}).items():
        if name.startswith(ENV_PREFIX) or name == ENV_SWITCH:
            launch.env[name] = word
    for w in words[:start]:  # NAME=value prefixes of the command (and of env/srun wrappers before it)
        m = _ASSIGN.match(w.text)
        if m and (m.group(1).startswith(ENV_PREFIX) or m.group(1) == ENV_SWITCH):
            launch.env[m.group(1)] = _value_word(w, m.end())
    table = _flag_table(version)
    launch.srun = any(not w.splat and os.path.basename(w.text) == "srun" for w in words[:start])
    i = start
    while i < len(words):
        w = words[i]
        text = w.text
        if w.splat or (text[:1] == UNKNOWN_CHAR and not text.endswith(".py")) or (
                text.startswith("--") and UNKNOWN_CHAR in text.partition("=")[0]):
            # a word the script does not determine where a flag or the script may stand: any flags may hide
            # in it, so the launch is not read (the caller names the word in its skip note)
            if refused is not None:
                refused.append(w)
            return None
        if not text.startswith("--") or text == "--":
            if text.startswith("-") and text != "-m" and text != "--":
                launch.error = InputError("ML006", f"accelerate launch does not take {text!r} (argparse refuses it)",
                                          w.line, w.col)
                return launch
            if text == "-m":
                i += 1
                continue
            launch.script = text if text != "--" else (words[i + 1].text if i + 1 < len(words) else None)
            launch.script_args = [x.text for x in words[i + (2 if text == "--" else 1):]]
            break
        name, _, inline = text[2:].partition("=")
        flag = _resolve(name, table)
        if flag is None or isinstance(flag, list):
            close = flag or [f for f in table if f.startswith(name.replace("-", "_")[:4])][:3]
            what = "is ambiguous" if flag else "is not one of its flags"
            launch.error = InputError("ML006", f"accelerate launch refuses --{name}: it {what} (argparse)",
                                      w.line, w.col, help=("did you mean " + ", ".join("--" + c for c in close))
                                      if close else None)
            return launch
        entry = table[flag]
        if entry.get("action") == "store_true":
            launch.flags[flag] = type(w)("true", w.line, w.col)
            i += 1
            continue
        if "=" in text:
            launch.flags[flag] = _value_word(w, len(name) + 3)
            i += 1
            continue
        if i + 1 >= len(words):
            launch.error = InputError("ML006", f"--{name} needs a value", w.line, w.col)
            return launch
        launch.flags[flag] = words[i + 1]
        i += 2
    rank = launch.flags.get("machine_rank")
    if launch.srun and rank is not None and isinstance(rank.unknown, PerTaskOnce):
        launch.rank_once = rank.unknown.var
        if rank.unknown.at:  # the finding points where the script writes the variable, not at a string built of it
            rank.line, rank.col = rank.unknown.at
    return launch


def _resolve(name: str, table: dict):
    """The flag argparse takes ``--name`` for: one of its option strings (``--x_y``, the all-dashes ``--x-y`` that
    Accelerate's _StoreAction adds, an alias), or the one option string it is a prefix of; a list of the
    candidates when it is a prefix of several (argparse calls it ambiguous); None when it is none."""
    options: dict = {}
    for flag, entry in table.items():
        for option in [flag, *(a[2:] for a in entry.get("aliases", []))]:
            options[option] = flag
            options[option.replace("_", "-")] = flag
    if name in options:
        return options[name]
    matches = sorted({o for o in options if o.startswith(name)})
    if len(matches) == 1:
        return options[matches[0]]
    return sorted({options[o] for o in matches}) or None


def _value_word(word, start: int):
    return type(word)(word.text[start:], word.line, word.col + start)


def parse_argv(argv: list):
    """``meshlint check -- accelerate launch ...``: the command given as words (columns of the joined line)."""
    from meshlint.inputs.launch_words import Word

    words, col = [], 1
    for arg in argv:
        words.append(Word(arg, 1, col))
        col += len(arg) + 1
    launch = from_words(words, None)
    if launch is None:
        raise InputError("ML006", "not an accelerate launch command")
    if launch.error is not None:
        raise launch.error
    return launch
