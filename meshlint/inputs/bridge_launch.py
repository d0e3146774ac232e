"""Megatron-Bridge launch lines: ``torchrun ... run_recipe.py --recipe NAME model.tensor_model_parallel_size=4 ...``.

meshlint/inputs/launch.py hands the words after ``scripts/training/run_recipe.py`` here (its FRAMEWORK_LAUNCHES
hook); ``make_source`` finds the recipe function NAME in the Bridge checkout and reads it with the words'
``section.field=value`` overrides laid over it (inputs/bridge_recipe.py). run_recipe.py's own flags are those of
Megatron-Bridge v0.3.1 (scripts/training/run_recipe.py: --recipe, --mode, --step_func, --peft_scheme,
--packed_sequence, --seq_length, and the Hydra-style overrides it passes to process_config_with_overrides).
"""

from __future__ import annotations

import os
import re

from meshlint.errors import InputError
from meshlint.inputs.megatron_launch import MegatronLaunch

_ENTRY = re.compile(r"(^|/)run_recipe\.py$")
_FLAGS_WITH_VALUE = ("--recipe", "--mode", "--step_func", "--peft_scheme", "--seq_length")
_OVERRIDE = re.compile(r"^\+?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+=")


def recognises(script, as_module: bool) -> bool:
    """Megatron-Bridge's generic recipe runner (scripts/training/run_recipe.py)."""
    return not as_module and bool(_ENTRY.search(script.text.replace("\\", "/")))


class BridgeLaunch(MegatronLaunch):
    """One run of run_recipe.py: the recipe it names and the overrides after it."""

    input_form = "bridge"

    def __init__(self, script_path: str, recipe, overrides: list, flags: dict, launcher: str, file, line: int,
                 text: str, col: int):
        super().__init__(os.path.basename(script_path), [], launcher, file, line, text, col)
        self.script_path = script_path
        self.recipe = recipe          # the --recipe Word (None when not given)
        self.overrides_words = overrides
        self.flags = flags            # run_recipe.py's own flags: name -> Word

    @property
    def display(self) -> str:
        name = self.recipe.text if self.recipe is not None and self.recipe.known() else "?"
        return f"{self.file}:{self.line}::{name}" if self.file else f"{super().display}::{name}"


def launch(script, args: list, origin, launcher: str, env: dict, first, index0: int) -> BridgeLaunch:
    """The Launch for ``<launcher> ... run_recipe.py ARGS``."""
    from meshlint.inputs.launch_words import _shown

    flags, overrides, notes = {}, [], []
    i = 0
    while i < len(args):
        w = args[i]
        text = w.text if w.known() else ""
        name, eq, value = text.partition("=")
        if name in _FLAGS_WITH_VALUE:
            if eq:
                flags[name] = w  # --recipe=NAME: the value is the word's text after '='
            elif i + 1 < len(args):
                flags[name] = args[i + 1]
                i += 1
        elif text == "--packed_sequence":
            flags[text] = w
        elif _OVERRIDE.match(text):
            overrides.append(w)
        elif w.splat or not w.known():
            notes.append(f"{_shown(w)} is not determined by the script: overrides it may hold are not read")
        i += 1
    words_text = " ".join([first.text, script.text] + [_shown(w) for w in args])
    out = BridgeLaunch(script.text, flags.get("--recipe"), overrides, flags, launcher, origin.file, first.line,
                       words_text if len(words_text) <= 200 else words_text[:197] + "...", first.col)
    out.notes = notes
    out.env = {"known": False}
    return out


def _value(word, flag: str) -> str | None:
    if word is None or not word.known():
        return None
    text = word.text
    return text.partition("=")[2] if text.startswith(flag + "=") else text


def find_recipe(name: str, script_path: str, start_dir: str) -> str:
    """The file of the Bridge checkout that defines recipe ``name`` (beside the script, $MEGATRON_BRIDGE_ROOT,
    or above the working directory)."""
    from meshlint.inputs.bridge_recipe import search_path

    roots = []
    here = os.path.dirname(os.path.abspath(os.path.join(start_dir, script_path)))
    for base in (here, os.path.abspath(start_dir)):
        for _ in range(8):
            roots.append(os.path.join(base, "src"))
            parent = os.path.dirname(base)
            if parent == base:
                break
            base = parent
    roots = search_path() + roots
    pattern = re.compile(rf"^def {re.escape(name)}\(", re.M)
    seen = set()
    for root in roots:
        recipes = os.path.join(root, "megatron", "bridge", "recipes")
        if root in seen or not os.path.isdir(recipes):
            continue
        seen.add(root)
        for folder, dirs, files in os.walk(recipes):
            dirs.sort()
            for file in sorted(files):
                if file.endswith(".py"):
                    path = os.path.join(folder, file)
                    try:
                        with open(path, encoding="utf-8", errors="replace") as f:
                            if pattern.search(f.read()):
                                return path
                    except OSError:
                        continue
        raise InputError("ML006", f"no recipe function {name!r} under {recipes}")
    raise InputError("ML006", f"cannot find the Megatron-Bridge checkout that defines recipe {name!r}",
                     help="set MEGATRON_BRIDGE_ROOT to the checkout (the directory holding src/megatron/bridge), "
                          "or run meshlint from inside it")


def make_source(launch: BridgeLaunch, start_dir: str):
    """The recipe the launch names, read with its overrides (positions: the launch's words)."""
    from meshlint.inputs.bridge_recipe import recipe_sources

    name = _value(launch.recipe, "--recipe")
    if name is None:
        raise InputError("ML006", "run_recipe.py needs --recipe NAME (a recipe function of megatron.bridge.recipes)"
                         if launch.recipe is None else "--recipe is not determined by the script",
                         launch.line, launch.entry_col)
    path = find_recipe(name, launch.script_path, start_dir)
    overrides = [(w.text, w.line, w.col) for w in launch.overrides_words]
    seq = _value(launch.flags.get("--seq_length"), "--seq_length")
    if seq is not None:   # run_recipe.py sets model.seq_length and dataset.seq_length from --seq_length
        word = launch.flags["--seq_length"]
        overrides.insert(0, (f"model.seq_length={seq}", word.line, word.col))
    (source,) = recipe_sources(path, name, overrides, launch=launch)
    source.path = launch.display
    source.launch.notes = list(source.launch.notes) + list(launch.notes)
    return source
