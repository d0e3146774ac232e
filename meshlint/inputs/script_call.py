"""A launch script called with arguments: ``sbatch [--nodes=4 ...] run.sh CONFIG.toml --train.max_steps=50``,
``bash run.sh ...``. The script is read with ``$1``, ``"$@"`` ... bound to the call's words, and sbatch's own
options on the call win over the script's ``#SBATCH`` lines (sbatch's rule), so a script that takes its config
as an argument (KempnerForge's scripts/slurm/*.sh) is checked as it would run."""

from __future__ import annotations

import os

from meshlint.errors import InputError

SHELLS = ("bash", "sh", "zsh")   # with "sbatch": inputs/script_lex.SUBMITTERS
SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash")


class ScriptCall:
    """The script a command runs and what it passes it."""

    __slots__ = ("path", "args", "sbatch", "text")

    def __init__(self, path: str, args: list, sbatch: dict, text: str):
        self.path = path        # the script, as the command names it
        self.args = args        # [Word]: $1, $2 ...
        self.sbatch = sbatch    # option -> Word, from sbatch's command line
        self.text = text        # the call as written (shown in notes)

    def __repr__(self) -> str:
        return f"ScriptCall({self.text!r})"


def script_call(words: list, base_dir: str | None = None) -> ScriptCall | None:
    """The ScriptCall ``words`` make (``sbatch OPTS SCRIPT ARGS``, ``bash SCRIPT ARGS``), or None when they
    call no readable script. ``base_dir``: where a relative script path is looked up first (the working
    directory, then ``base_dir``: a driver script usually submits its neighbours)."""
    from meshlint.inputs.launch_commands import _srun_options

    if not words or words[0].splat:
        return None
    head = os.path.basename(words[0].text)
    sbatch: dict = {}
    if head == "sbatch":
        sbatch, i = _srun_options(words, 1)
    elif head in SHELLS:
        i = 1
        while i < len(words) and words[i].text.startswith("-") and not words[i].splat:
            if words[i].text in ("-c",):
                return None   # bash -c 'STRING': a command, not a script
            i += 1
    else:
        return None
    if i >= len(words) or not words[i].known() or not words[i].text.endswith(SCRIPT_SUFFIXES):
        return None
    path = _find(words[i].text, base_dir)
    if path is None or os.path.basename(path) == "run_train.sh":   # torchtitan's: its own launch form
        return None
    text = " ".join(w.text if w.known() else (w.raw or "?") for w in words)
    return ScriptCall(path, list(words[i + 1:]), sbatch, text if len(text) <= 160 else text[:157] + "...")


def _find(name: str, base_dir: str | None) -> str | None:
    for candidate in (name, os.path.join(base_dir, name) if base_dir and not os.path.isabs(name) else None):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def call_from_argv(argv: list) -> ScriptCall | None:
    """``meshlint check -- sbatch --nodes=4 scripts/slurm/multinode.sh CONFIG ...``: the call, or None.
    Raises InputError(ML001) when the command names a script that is not there."""
    from meshlint.inputs.launch_words import Word

    words, col = [], 1
    for arg in argv:
        words.append(Word(arg, 1, col))
        col += len(arg) + 1
    call = script_call(words, None)
    if call is None and words and os.path.basename(words[0].text) in ("sbatch",) + SHELLS:
        named = next((w.text for w in words[1:] if w.text.endswith(SCRIPT_SUFFIXES)), None)
        if named is not None and not os.path.isfile(named):
            raise InputError("ML001", f"{words[0].text} runs {named}, which is not there (from {os.getcwd()})")
    return call


def read_with_submitted(path: str, version: str | None = None, call: ScriptCall | None = None) -> list:
    """A script's launches (``read_launch_script``), with those of each script it submits (``sbatch --nodes=2
    job.sh CONFIG``) in their place, read as that line runs it: one level deep (a submitted script's own
    submissions are not followed). A submitted script that cannot be read is one launch with its error."""
    from meshlint.inputs.launch_words import Launch
    from meshlint.inputs.script_lex import MAX_LAUNCHES
    from meshlint.inputs.scripts import read_launch_script

    submitted: list | None = [] if call is None else None
    launches = read_launch_script(path, version, call, submitted)
    if not submitted:
        return launches
    out: list = []
    at = 0
    base = os.path.dirname(os.path.abspath(path))
    for index, words, line in submitted:
        out.extend(launches[at:index])
        at = index
        inner = script_call(words, base)
        if inner is None or os.path.abspath(inner.path) == os.path.abspath(path):
            continue
        where = f"{os.path.basename(path)} line {line}"
        try:
            found = read_launch_script(inner.path, version, inner)
        except InputError as exc:
            exc.message = f"{inner.path} (submitted on {where}): {exc.message}"
            found = [Launch(None, None, [], file=inner.path, line=exc.line or 1, error=exc)]
        for launch in found:
            launch.notes.insert(0, f"submitted by {where}")
        out.extend(found)
        if len(out) > MAX_LAUNCHES:
            raise InputError("ML007", f"more than {MAX_LAUNCHES} launch lines in one script and the scripts it "
                                      f"submits (limit {MAX_LAUNCHES})", line, 1)
    out.extend(launches[at:])
    return out
