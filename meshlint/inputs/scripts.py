"""Launch scripts (.sh, .sbatch, .slurm): every torchtitan launch line in them, each one config, with the
variables the script itself sets expanded and the world size its torchrun/srun/#SBATCH lines give.

A small, bounded reading of shell, not a shell: quotes, backslash continuations, comments, here-documents
(skipped), ``NAME=value``/``export``/``declare`` assignments, ``${X:-default}``, ``$((arithmetic))``
and simple arrays are understood, and so is a command string a shell runs (``bash -c "$CMD"``,
script_reader.py ``_shell_string``); a variable the script does not set, a ``$(command)``, a loop variable or
one set inside an if/else or loop (read after it) is unknown, and so is any override built from it.
``"$@"`` (the script's own arguments) is noted, and the config is checked as run without them.
Nothing is executed.
"""

from __future__ import annotations

from meshlint.errors import InputError
from meshlint.inputs.launch_commands import FRAMEWORK_MARKERS
from meshlint.inputs.script_lex import _Lexer
from meshlint.inputs.script_reader import _Reader


try:  # the project's limits, where they are kept in one place
    from meshlint.limits import MAX_FILE_BYTES as MAX_SCRIPT_BYTES
    from meshlint.limits import MAX_LINE_CHARS
except ImportError:  # pragma: no cover
    MAX_SCRIPT_BYTES = 1 << 20
    MAX_LINE_CHARS = 32_768


def read_launch_script(path: str, version: str | None = None, call=None, submitted: list | None = None) -> list:
    """Every torchtitan launch line of a script, in order, as Launch objects (``file``/``line`` set,
    overrides positioned in the script). A script with no launch line gives []. A launch line that
    cannot be checked has ``error`` set (its other launch lines are still returned).

    Raises InputError: ML001 (missing, a directory, a FIFO/device: refused unread), ML002 (binary or
    not UTF-8, when it mentions torchtitan), ML007 (over the size, line-length or launch-count limits).
    ``call``: the ScriptCall that runs it (inputs/script_call.py): its arguments and sbatch options.
    ``submitted``: a list that receives (launch index, words, line) of each line running another script."""
    from meshlint.inputs.source import read_bytes

    raw = read_bytes(path, MAX_SCRIPT_BYTES)
    if len(raw) > MAX_SCRIPT_BYTES:
        raise InputError("ML007", f"file is over {MAX_SCRIPT_BYTES:,} bytes (limit {MAX_SCRIPT_BYTES:,})")
    if b"torchtitan" not in raw and b"run_train" not in raw and b"train.py" not in raw and b"accelerate" not in raw \
            and b"sbatch" not in raw and not any(m in raw for m in FRAMEWORK_MARKERS):
        return []   # the fast path for any shell script a pre-commit hook hands over
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise InputError("ML002", f"binary file (NUL byte at offset {nul})", line, 1)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError("ML002", f"not UTF-8 text (invalid byte 0x{raw[exc.start:exc.start + 1].hex()} at offset "
                                  f"{exc.start})", line, 1) from None
    return launches_in_text(text, file=path, version=version, call=call, submitted=submitted)


def launches_in_text(text: str, file: str | None = None, version: str | None = None, call=None,
                     submitted: list | None = None) -> list:
    """The launches of a script's text (``file`` names it in positions and hint sources)."""
    _check_lines(text)
    lexer = _Lexer(text)
    commands = lexer.commands()
    reader = _Reader(file, version, lexer)
    reader.submitted = submitted
    if call is not None:
        reader.called_as(call)
    reader.run(commands)
    if call is not None:
        for launch in reader.launches:
            launch.notes.insert(0, f"read as run by: {call.text}")
    found = Launches(reader.launches)
    found.unread = list(reader.unread)
    return found


class Launches(list):
    """The launches of a script; ``unread``: (line, why) of the commands that were not read because one of their
    words is not determined by the script (what a skip note says when no launch was read)."""

    unread: tuple = ()


def _check_lines(text: str) -> None:
    start = 0
    n = len(text)
    while start <= n:
        end = text.find("\n", start)
        if end < 0:
            end = n
        if end - start > MAX_LINE_CHARS:
            line = text.count("\n", 0, start) + 1
            raise InputError("ML007", f"line {line} is {end - start:,} characters long (limit {MAX_LINE_CHARS:,})",
                             line, 1)
        start = end + 1
