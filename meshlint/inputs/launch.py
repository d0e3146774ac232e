"""torchtitan launch lines the way its launcher reads them: tyro overrides, torchrun/srun/run_train.sh
facts as topology hints, overrides applied to a registry config, and saved ``--debug.save_config_file`` JSON.

What torchtitan does, read off its code (main b5bcd76c6 and 0.3.0 are the same here):
  torchtitan/config/manager.py:54-80  ``--module``/``--config`` (and ``=`` forms) are taken out of argv
      first, anywhere in it, the last one winning; ``--module`` with nothing after it is a ValueError.
  manager.py:40  the rest goes to ``tyro.cli(type(config), args=rest, default=config)``: options are
      ``--section.field``; tyro's own backend (tyro 1.0.17, tyro/_backends/_tyro_backend.py) is
      emulated below, each rule with the experiment that confirmed it (tests/test_launch.py repeats
      them against tyro itself).
  trainer.py:77  ``model_spec`` is ``tyro.conf.Suppress``: no ``--model...`` option exists.
  distributed/activation_checkpoint.py:332-337  ``activation_checkpoint`` is a tyro subcommand union:
      ``activation-checkpoint:{selective,full,memory-budget,none}``.
  trainer.py:212-231, 238-246  ``--debug.save_config_file F`` writes ``json.dump(config.to_dict(),
      indent=2)`` to ``dump_folder/F``; ``model_spec`` becomes ``{"name", "flavor", "model"}``.

Nothing here imports tyro, torch or torchtitan.

The parts: ``launch_words`` (words, launches, messages), ``tyro_schema`` (the CLI surface), ``tyro_overrides``
(torchtitan's own arguments), ``launch_commands`` (torchrun/srun/run_train.sh), ``override_apply`` (overrides laid
over a registry config), ``saved_config`` (saved JSON); this module parses a launch given as argv or one line.
"""

from __future__ import annotations

import shlex

from meshlint.errors import InputError
from meshlint.inputs.launch_words import Launch, MAX_ARGS, MAX_WORD_CHARS, _Origin, UNKNOWN_CHAR, Word
from meshlint.inputs.launch_commands import launch_from_words, _trainer_launch
# what a launch is and what is read from it, also imported from here (the command line, the tests)
from meshlint.inputs.launch_words import COMMAND_LINE, Override, UnknownValue  # noqa: F401
from meshlint.inputs.override_apply import apply_overrides  # noqa: F401
from meshlint.inputs.saved_config import read_saved_config  # noqa: F401
from meshlint.inputs.tyro_overrides import parse_overrides  # noqa: F401


# ----------------------------------------------------------------------------- parsing argv

def parse_launch_args(argv: list, version: str | None = None) -> Launch:
    """A launch given as argv: meshlint's own ``--module M --config F [--] OVERRIDES``, or a whole
    command (``torchrun ... -m torchtitan.train ...``, ``python -m torchtitan.train ...``,
    ``NGPU=8 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh ...``). Raises InputError(ML006/ML007)."""
    if not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv):
        raise InputError("ML006", "a launch line is a list of words")
    if len(argv) > MAX_ARGS:
        raise InputError("ML007", f"the launch line has {len(argv):,} words (limit {MAX_ARGS:,})")
    words, col = [], 1
    for arg in argv:
        if len(arg) > MAX_WORD_CHARS:
            raise InputError("ML007", f"a launch argument is {len(arg):,} characters long (limit {MAX_WORD_CHARS:,})")
        if UNKNOWN_CHAR in arg:
            raise InputError("ML006", "a launch argument contains a NUL character")
        words.append(Word(arg, 1, col))
        col += len(shlex.quote(arg)) + 1
    origin = _Origin(None, True)
    launch = launch_from_words(words, origin, version=version)
    if launch is None and words and not words[0].text.startswith("-"):
        raise InputError("ML006", f"{argv[0]!r} ... starts no training meshlint reads: a launch is torchrun/python "
                                  "-m torchtitan.train (--module M --config F, or v0.2's --job.config_file X.toml), "
                                  "run_train.sh, torchtitan's own --module M --config F ..., [torchrun|srun|uv run] "
                                  "python scripts/train.py CONFIG.toml --section.key=value ... (KempnerForge), "
                                  "[torchrun|python] pretrain_gpt.py ... (Megatron-LM), or accelerate launch ...",
                         1, 1, help="e.g. torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config "
                                    "llama3_8b, or torchrun --nproc_per_node=2 scripts/train.py configs/train/debug.toml")
    if launch is None:
        # meshlint's own form: torchtitan's arguments directly
        launch = _trainer_launch(words, origin, "cli", env={}, version=version, first=words[0] if words else None)
    if launch.error is not None:
        raise launch.error
    return launch


def parse_launch_line(text: str, version: str | None = None) -> Launch | None:
    """A launch written as one shell command line (variables are unknown unless assigned on it)."""
    from meshlint.inputs.scripts import launches_in_text

    launches = launches_in_text(text, file=None, version=version)
    if not launches:
        return None
    if launches[0].error is not None:
        raise launches[0].error
    return launches[0]
