"""KempnerForge launch lines: ``scripts/train.py CONFIG --section.key=value ...`` read the way its own
code reads them, into a Launch whose overrides carry the script position of each word.

What KempnerForge does, read off its code (5666d0d):
  scripts/train.py:70-77  ``sys.argv[1]`` is the TOML path, ``sys.argv[2:]`` go to ``load_config``.
  config/loader.py:250-285 ``_parse_cli_overrides``: an argument not starting with ``--`` is skipped;
      ``--key`` without ``=`` is the string "true"; the value is ``ast.literal_eval``'d (kept as the
      string when that fails); dotted keys build a nested dict, a later key replacing an earlier one.
  loader.py:315-326  that dict is laid over the TOML's config by ``_apply_dict_to_dataclass``, the same
      function the TOML went through: unknown keys refused, values converted by ``_coerce_value``.
  distributed/setup.py:24-41  ``get_world_info``: the world is WORLD_SIZE, else SLURM_NTASKS, else 1.
So ``--distributed.tp 4`` gives tp the string "true" (``int('true')`` refuses it at load: ValueError) and
drops the 4; ``--distributed.tp=True`` gives the bool True, which counts as 1.

Nothing here imports KempnerForge or torch.
"""

from __future__ import annotations

import ast
import warnings
from typing import Any, NamedTuple

from meshlint.errors import InputError
from meshlint.inputs.launch_words import (
    UNKNOWN_CHAR,
    Launch,
    UnknownValue,
    Word,
    _err,
    _pos,
    _shown,
    _where,
    splat_note,
)
from meshlint.mesh.topology import Hint

FRAMEWORK = "kempnerforge"
MAX_LITERAL_DEPTH = 50    # brackets nested in one value: ast.literal_eval recurses on them


def is_kf_train(script: Word, args: list) -> bool:
    """``scripts/train.py CONFIG``: KempnerForge's entry point. A bare ``train.py`` counts only with a
    ``.toml`` config after it (many projects have a train.py)."""
    path = script.text.replace("\\", "/")
    if not path.endswith("train.py") or path.endswith("torchtitan/train.py"):
        return False
    if _is_scripts_train(path):
        return True
    return bool(args) and args[0].known() and args[0].text.endswith(".toml")


def _is_scripts_train(path: str) -> bool:
    path = path.replace("\\", "/")
    return path == "scripts/train.py" or path.endswith("/scripts/train.py")


def kf_launch(args: list, origin, launcher: str, first: Word | None, index0: int = 0,
              script: Word | None = None) -> Launch:
    """The Launch of ``train.py ARGS`` (``args``: the words after train.py, ``script``: its word)."""
    line = first.line if first is not None else 1
    shown = [w for w in (first, script) if w is not None and w is not (args[0] if args else None)] + list(args)
    text = " ".join(_shown(w) if not w.splat else w.raw for w in shown)
    text = text if len(text) <= 200 else text[:197] + "..."
    launch = Launch(None, None, [], [], launcher, origin.file, line, text)
    launch.framework = FRAMEWORK
    launch.config_word = None
    # a bare train.py is KempnerForge's only if its TOML is one (toml_launch checks)
    launch.entry_explicit = script is None or _is_scripts_train(script.text)
    launch.dashless = []   # overrides written without '--' (Hydra's habit), which the parser skips: ML322
    try:
        if not args:
            raise _err("scripts/train.py needs a config: KempnerForge prints its usage and exits "
                       "(scripts/train.py:70-72)", first or Word(""), origin,
                       help="e.g. scripts/train.py configs/train/debug.toml --distributed.tp=2")
        config = args[0]
        if config.splat or not config.known():
            launch.unresolved = (f"the config path is {_shown(config)} ({_where(config, origin)}), which the script "
                                 f"does not determine ({config.unknown or 'expands to any number of words'})")
        elif config.text.startswith("--"):
            raise _err(f"scripts/train.py takes the config path first, not {config.text!r}: KempnerForge would "
                       "read the option as the TOML path", config, origin,
                       help="e.g. scripts/train.py configs/train/debug.toml --distributed.tp=2")
        launch.config_word = config
        launch.config = config.text if config.known() else None
        launch.overrides = parse_kf_overrides(args[1:], origin, launch.notes, index0 + 1, launch.dashless)
    except InputError as exc:
        launch.error = exc
    return launch


def parse_kf_overrides(words: list, origin, notes: list, index0: int = 0, dashless: list | None = None) -> list:
    """``_parse_cli_overrides`` (loader.py:250-285) on these words: [Override] in order, kind
    ``value`` (``--k=v``), ``flag`` (``--k`` alone: the string "true") or ``space`` (``--k v``: also
    "true", and ``v`` dropped; ``text`` shows both words). Raises InputError where the parser crashes.
    ``dashless`` receives ``{key, value, word, position}`` of each ``section.key=value`` word, which the
    parser skips (loader.py:261-262) like any word without ``--``."""
    from meshlint.frameworks.kempnerforge.v5666d0d import dashless_override

    out: list = []
    tree: dict = {}          # the nested dict the parser builds, to find where it crashes
    for k, w in enumerate(words):
        if w.splat:
            notes.append(splat_note(w, origin))
            continue
        t = w.text
        if not t.startswith("--"):
            prev = out[-1] if out else None
            if prev is not None and prev.kind == "flag" and prev.index == index0 + k - 1:
                out[-1] = prev._replace(kind="space", text=f"{prev.text} {_shown(w)}", dropped=_shown(w))
            else:
                notes.append(f"{_shown(w)!r} ({_where(w, origin)}) does not start with '--': KempnerForge's override "
                             "parser skips it")
                found = dashless_override(t) if dashless is not None else None
                if found is not None:   # (a key built from an unknown value has UNKNOWN_CHAR: not an identifier)
                    value = found[1] if UNKNOWN_CHAR not in found[1] else _shown(w).partition("=")[2] or "?"
                    dashless.append({"key": found[0], "value": value, "word": t if w.known() else _shown(w),
                                     "position": _pos(w, origin)})
            continue
        key, eq, raw = t[2:].partition("=")
        if UNKNOWN_CHAR in key:
            known = key.split(UNKNOWN_CHAR, 1)[0].rsplit(".", 1)[0] if "." in key.split(UNKNOWN_CHAR, 1)[0] else ""
            out.append(KfOverride(known, UnknownValue(f"the option {_shown(w)} is built from "
                                                      f"{w.unknown or 'an unknown value'}"),
                                  index0 + k, _shown(w), _pos(w, origin), "value"))
            continue
        parts = key.split(".")
        if not all(parts):
            raise _err(f"{t.partition('=')[0]!r} is not a --section.key override: KempnerForge refuses the key "
                       f"{key!r} (\"Unknown config keys in JobConfig\")", w, origin,
                       help="overrides look like --distributed.tp=4")
        _place(tree, parts, w, origin)
        if not eq:
            out.append(KfOverride(key, "true", index0 + k, _shown(w), _pos(w, origin), "flag"))
            continue
        if UNKNOWN_CHAR in raw:
            out.append(KfOverride(key, UnknownValue(w.unknown or f"{_shown(w)} uses a value the script does not set"),
                                  index0 + k, _shown(w), _pos(w, origin), "value"))
            continue
        out.append(KfOverride(key, literal(raw, w, origin), index0 + k, _shown(w), _pos(w, origin), "value"))
    return out


class KfOverride(NamedTuple):
    """One override as KempnerForge's parser takes it (fields as launch.Override; ``dropped``: the value
    word the space form loses)."""

    path: str
    value: Any
    index: int
    text: str
    position: tuple | None = None
    kind: str = "value"          # value | flag | space
    dropped: str | None = None

    @property
    def known(self) -> bool:
        return not isinstance(self.value, UnknownValue)


def _place(tree: dict, parts: list, w: Word, origin) -> None:
    """The parser's ``d.setdefault(part, {})`` walk: a key below one already given a value crashes it."""
    node = tree
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise _err(f"{_shown(w)} sets a key below {'.'.join(parts[:depth + 1])}, which an earlier override gave a "
                       "value: KempnerForge's override parser crashes on it (loader.py:281-284)", w, origin)
        node = child
    if isinstance(node.get(parts[-1]), dict) and node[parts[-1]]:
        raise _err(f"{_shown(w)} gives {'.'.join(parts)} a value after earlier overrides set keys below it: "
                   "KempnerForge replaces them all with this value and fails to apply it", w, origin)
    node[parts[-1]] = True


def literal(raw: str, w: Word, origin):
    """``ast.literal_eval(raw)``, else the string, as the parser does; a value KempnerForge cannot get
    from TOML (None, a set, bytes, complex) is an UnknownValue, never guessed. A tuple becomes a list
    (what ``_coerce_value`` makes of either for a tuple field)."""
    depth = best = 0
    for c in raw:
        depth += c in "([{"
        depth -= c in ")]}"
        best = max(best, depth)
    if best > MAX_LITERAL_DEPTH:
        raise _err(f"{_shown(w)} nests brackets {best} deep (limit {MAX_LITERAL_DEPTH})", w, origin, code="ML007")
    try:
        with warnings.catch_warnings():   # "invalid decimal literal" and the like: not the user's business here
            warnings.simplefilter("ignore")
            value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw
    return _plain(value, raw)


def _plain(value, raw: str):
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        items = [_plain(v, raw) for v in value]
        bad = next((v for v in items if isinstance(v, UnknownValue)), None)
        return bad if bad is not None else items
    if isinstance(value, dict):
        items = {str(k): _plain(v, raw) for k, v in value.items()}
        bad = next((v for v in items.values() if isinstance(v, UnknownValue)), None)
        return bad if bad is not None else items
    if value is None or isinstance(value, (set, frozenset, bytes, complex)) or value is Ellipsis:
        return UnknownValue(f"{raw!r} is read as the Python {type(value).__name__} {value!r}, which meshlint does not "
                            "model in a KempnerForge config")
    return value


def direct_world_hint(env: dict, origin, cmd: Word, notes: list) -> Hint | None:
    """``python scripts/train.py`` without torchrun or srun: ``get_world_info`` reads WORLD_SIZE, else
    SLURM_NTASKS, else 1 (distributed/setup.py:34)."""
    from meshlint.inputs.launch_words import _int_of, _var_note

    for name in ("WORLD_SIZE", "SLURM_NTASKS"):
        w = env.get(name)
        if w is not None:
            world = _int_of(w, name, notes)
            if world is None:
                return None
            return Hint(f"{name}={w.text} ({_where(cmd, origin)}{_var_note([w])})", world_size=world)
    return Hint(f"python without torchrun or srun ({_where(cmd, origin)}): one process (KempnerForge's "
                "get_world_info: WORLD_SIZE and SLURM_NTASKS unset, so 1)", world_size=1, gpus_per_node=None, nodes=1)
