"""The words of a launch line and what is read from them (``Word``, ``Launch``, ``Override``,
``UnknownValue``, where a word came from), and the messages that point at a word: what every launch reader
shares (torchtitan's, KempnerForge's, v0.2's, Accelerate's, Megatron-LM's, the script reader)."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from meshlint.errors import InputError
from meshlint.mesh.topology import MAX_WORLD

SCRIPT_ARGS = ("$@", "$*", "${@}", "${*}")  # a word that passes the script's own arguments on


COMMAND_LINE = "<command line>"   # the "file" of an override given on meshlint's own command line
UNKNOWN_CHAR = "\x00"             # marks the unknown part of a word (a variable the script does not set)

MAX_ARGS = 10_000                 # words in one launch command
MAX_WORD_CHARS = 65_536           # characters of one word
MAX_INT_DIGITS = 1_000            # digits of one integer value (Python itself refuses str->int past 4,300)


# ----------------------------------------------------------------------------- the data types

class PerTaskOnce(str):
    """Why a word is unknown when it is a per-task Slurm variable (``$SLURM_PROCID``) that the script's own shell
    expands: to that shell's one value, so a command srun starts from that line gets the same word in every task.
    ``var``: its name."""

    var = ""
    at = None   # (line, col) where the script writes it

    def __new__(cls, var: str, at: tuple | None = None):
        self = super().__new__(cls, f"${var} is set per Slurm task; the script's own shell expands it here, to its "
                                    "one value")
        self.var, self.at = var, at
        return self


PER_TASK_SLURM = ("SLURM_PROCID", "SLURM_NODEID", "SLURM_LOCALID")


class UnknownValue(NamedTuple):
    """An override whose value the script does not determine (an unset variable, $(...))."""

    reason: str


class Override(NamedTuple):
    """One ``--section.field value`` as torchtitan's launcher applies it."""

    path: str                      # dotted config path, underscores: "parallelism.tensor_parallel_degree"
    value: Any                     # typed value; raw str (list of str) when not typed; UnknownValue
    token_index: int               # index of the option's word in the command's arguments
    text: str                      # the words as written: "--parallelism.tensor_parallel_degree 8"
    position: tuple | None = None  # (file, line, col) of the option's word; file is COMMAND_LINE for argv
    kind: str = "value"            # value | flag | subcommand | error
    typed: bool = True             # False: the field's type is not known here (value is the raw text)
    refusal: Any = None            # InputError tyro gives unless the checkout's own dataclass has the field

    @property
    def known(self) -> bool:
        return not isinstance(self.value, UnknownValue)

    def where(self) -> str:
        if not self.position:
            return f"argument {self.token_index + 1}"
        file, line, col = self.position
        return f"the command line, column {col}" if file == COMMAND_LINE else f"{os.path.basename(file)}:{line}:{col}"


class Launch:
    """One torchtitan run: which config, its overrides, and what the launcher says about the world."""

    def __init__(self, module: str | None, config: str | None, overrides: list, hints: list | None = None,
                 launcher: str = "cli", file: str | None = None, line: int = 1, text: str = "",
                 facts: dict | None = None, notes: list | None = None, error: InputError | None = None):
        self.module = module          # --module as torchtitan gets it (a shorthand or a dotted module)
        self.config = config          # --config: the function name
        self.overrides = overrides    # [Override], in order (a later one wins, as in tyro)
        self.hints = hints or []      # [topology.Hint], most specific first: torchrun/NGPU, srun, #SBATCH
        self.launcher = launcher      # cli | torchrun | python | run_train.sh (+ "srun " prefix)
        self.file = file              # the launch script, None for a command line
        self.line = line              # line of the launcher word (torchrun, python, run_train.sh)
        self.text = text              # the command, shortened, for messages
        self.facts = facts or {}      # torchrun/srun/#SBATCH/env values as written (strings)
        self.notes = notes or []      # things a user should know (passes "$@" through, elastic nnodes)
        self.error = error            # why this launch cannot be checked (an ML006 InputError)

    @property
    def display(self) -> str:
        """``run.sh:12::llama3_70b`` for a script's launch line, ``--module M --config F`` otherwise."""
        if self.file:
            return f"{self.file}:{self.line}::{self.config or '?'}"
        return f"--module {self.module} --config {self.config}"

    def __repr__(self) -> str:
        return (f"Launch({self.module!r}, {self.config!r}, {len(self.overrides)} overrides, "
                f"line={self.line}, hints={[h.source for h in self.hints]!r})")


class Word:
    """One shell word after expansion. Unknown parts of ``text`` are UNKNOWN_CHAR; ``unknown`` says why."""

    __slots__ = ("text", "unknown", "line", "col", "raw", "splat", "vars", "whys")

    def __init__(self, text: str, line: int = 1, col: int = 1, raw: str | None = None,
                 unknown: str | None = None, splat: bool = False, vars: tuple = (), whys: tuple = ()):
        self.text = text
        self.whys = whys         # why each UNKNOWN_CHAR of text is unknown, in order (the script reader's)
        self.unknown = unknown   # None: fully known
        self.line = line
        self.col = col
        self.raw = text if raw is None else raw
        self.splat = splat       # expands to an unknown number of words ("$@", an unquoted unset $X)
        self.vars = vars         # ((name, value, line set or None[, note]), ...) that went into it

    def known(self) -> bool:
        return self.unknown is None and not self.splat

    def passes_args(self) -> bool:
        """Whether the word passes the script's own arguments on (``"$@"``, ``$*``, ...)."""
        return self.splat and self.raw.strip('"') in SCRIPT_ARGS

    def __repr__(self) -> str:
        return f"Word({self.text!r}{', unknown' if self.unknown else ''}{', splat' if self.splat else ''})"


class _Origin(NamedTuple):
    file: str | None               # script path, or None (argv)
    line_of_cli: bool = False      # argv: positions are columns of the joined command line


def _sub(word: Word, start: int) -> Word:
    """The part of a word after ``start`` (the value of NAME=value, of --opt=value)."""
    text = word.text[start:]
    unknown = word.unknown if UNKNOWN_CHAR in text else None
    return Word(text, word.line, word.col + start, word.raw, unknown, False, word.vars)


def _int_of(word: Word | None, what: str, notes: list, lo: int = 1) -> int | None:
    if word is None:
        return None
    if not word.known():
        notes.append(f"{what} is {_shown(word)}, which the script does not determine ({word.unknown or 'unknown'})")
        return None
    t = word.text.strip()
    if not t.isdigit() or len(t) > 9 or not lo <= int(t) <= MAX_WORLD:
        notes.append(f"{what} {t!r} is not a whole number from {lo} to {MAX_WORLD:,}")
        return None
    return int(t)


def _shown(word: Word) -> str:
    return word.raw if word.raw else word.text.replace(UNKNOWN_CHAR, "?")


def _where(word: Word, origin: _Origin) -> str:
    if origin.file:
        return f"line {word.line}"
    return "on the command line"


def _var_note(words: list) -> str:
    seen, parts = set(), []
    for w in words:
        for item in w.vars:
            name, value, line = item[:3]
            note = item[3] if len(item) > 3 else None
            if name in seen:
                continue
            seen.add(name)
            where = f" on line {line}" if line else ""
            parts.append(f"{name}={value}{where}" + (f" ({note})" if note else ""))
    return f"; {', '.join(parts)}" if parts else ""


def _err(message: str, word: Word, origin: _Origin, help: str | None = None, code: str = "ML006") -> InputError:
    if origin.file:
        return InputError(code, message, word.line, word.col, help=help)
    return InputError(code, message, 1, word.col, help=help)


def _norm(name: str) -> str:
    """tyro's delimiter swap (tyro/_strings.py swap_delimiters_in_field_name), towards underscores:
    each dotted part has its inner hyphens swapped, its leading and trailing ones kept."""
    out = []
    for part in name.split("."):
        core = part.strip("-")
        lead = part[: len(part) - len(part.lstrip("-"))]
        trail = part[len(lead) + len(core):] if core else ""
        out.append(lead + core.replace("-", "_") + trail if core else part)
    return ".".join(out)


def _looks_negative(t: str) -> bool:
    # tyro/_backends/_tyro_backend.py _looks_like_negative_number
    if not (t.startswith("-") and len(t) > 1 and t[1] != "-"):
        return False
    rest = t[1:]
    return rest[0].isdigit() or rest[0] == "." or rest.lower() in ("inf", "infinity", "nan")


def _blocks(word: Word) -> bool:
    """Whether tyro refuses to take this word as an option's value (_blocks_value_consumption):
    ``--``, or a dash followed by a letter (``-foo``, ``--x``), but not a negative number."""
    if word.splat:
        return False
    t = word.text
    if t == "--":
        return True
    key = t.partition("=")[0]
    if _looks_negative(key):
        return False
    return key.startswith("-") and len(key) > 1 and key.lstrip("-")[:1].isalpha()


def _option_text(w: Word, values: list, eq: bool) -> str:
    return " ".join([_shown(w)] + [_shown(v) for v in values[1 if eq else 0:]])


def splat_note(w: Word, origin: _Origin) -> str:
    """The note for "$@" (or an unquoted unknown variable) among a launch's arguments."""
    return (f"{_shown(w)} ({_where(w, origin)}) passes on arguments meshlint cannot see: the config is checked as "
            "run without them")


def not_an_option(w: Word, origin: _Origin) -> InputError:
    """A word where torchtitan's parser (tyro) wants ``--section.option``."""
    return _err(f"{_shown(w)!r} is not a --section.option override: torchtitan's parser (tyro) refuses it "
                f"(\"Unrecognized options: {w.text}\")", w, origin,
                help="overrides look like --parallelism.tensor_parallel_degree 8")


def _pos(word: Word, origin: _Origin) -> tuple:
    return (origin.file or COMMAND_LINE, word.line, word.col)
