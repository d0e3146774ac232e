"""The model of an Accelerate run, from its Hugging Face ``config.json`` where one is at hand: a local model
directory, or the local Hugging Face cache (never the network). Gives the head counts the tensor-parallel
rules check; says where it looked when it finds none."""

from __future__ import annotations

import json
import os

from meshlint.errors import InputError
from meshlint.inputs.source import read_bytes

MAX_CONFIG_BYTES = 1 << 20
# training-script flags that name the model (Transformers' examples, TRL, axolotl)
MODEL_FLAGS = ("--model_name_or_path", "--model-name-or-path", "--model_name", "--model", "--model_id",
               "--base_model", "--pretrained_model_name_or_path")


def model_ref(args: list) -> str | None:
    """The model a training script's arguments name (``--model_name_or_path X`` or ``--model_name_or_path=X``)."""
    for i, arg in enumerate(args):
        for flag in MODEL_FLAGS:
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def hub_cache() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return os.path.join(home, "hub")


def find_config(ref: str, start_dir: str) -> tuple:
    """(path of config.json or None, how it was found or why not)."""
    local = ref if os.path.isabs(ref) else os.path.join(start_dir, ref)
    if os.path.isfile(os.path.join(local, "config.json")):
        return os.path.join(local, "config.json"), f"{ref}/config.json"
    if ref.count("/") != 1 or ref.startswith((".", "/")):
        return None, f"{ref!r} is neither a local model directory with a config.json nor a Hub id (org/name)"
    repo = os.path.join(hub_cache(), "models--" + ref.replace("/", "--"))
    snapshot = None
    try:
        with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as f:
            snapshot = f.read(100).strip()
    except OSError:
        pass
    candidates = [snapshot] if snapshot else []
    try:
        candidates += sorted(os.listdir(os.path.join(repo, "snapshots")))
    except OSError:
        pass
    for snap in candidates:
        path = os.path.join(repo, "snapshots", snap, "config.json")
        if os.path.isfile(path):
            return path, f"the local Hugging Face cache ({path})"
    return None, (f"{ref}'s config.json is not in the local Hugging Face cache ({hub_cache()}); meshlint never "
                  "downloads it")


def load_config(path: str) -> dict:
    """A config.json as a mapping (a text config nested under text_config: that one); {} when it is not one."""
    try:
        data = json.loads(read_bytes(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except (InputError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError("ML006", f"cannot read the model's {path}: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("text_config"), dict) and "num_attention_heads" not in data:
        data = data["text_config"]
    return data if isinstance(data, dict) else {}


def read_model(path: str) -> dict:
    """The head counts and sizes of a config.json (a text config nested under text_config counts too)."""
    data = load_config(path)
    if not data:
        return {}

    def number(key):
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    heads = number("num_attention_heads")
    return {"n_heads": heads, "n_kv_heads": number("num_key_value_heads") or heads, "dim": number("hidden_size"),
            "n_layers": number("num_hidden_layers"), "name": data.get("_name_or_path") or data.get("model_type")}


def attach_model(spec, source) -> None:
    """Model facts for an Accelerate config from the model its launch line names (``spec.extra['model_ref']``)."""
    ref = spec.extra.get("model_ref")
    if not ref:
        spec.values["accelerate.model_config"] = ("no model named: a launch line's --model_name_or_path (or --model) "
                                                  "gives the head counts the tp rules check")
        return
    start = os.path.dirname(os.path.abspath(getattr(source, "path", "") or "."))
    path, how = find_config(ref, start)
    spec.values["accelerate.model_config"] = how
    if path is None:
        return
    try:
        model = read_model(path)
    except InputError as exc:
        spec.values["accelerate.model_config"] = str(exc)
        return
    for key, value in model.items():
        if value is not None:
            spec.values[f"model.{key}"] = value
    spec.values["model.source"] = how
    spec.extra["model_config_path"] = path  # the memory estimate reads its sizes (estimate/memory_accelerate.py)
    spec.values["model.called"] = f"{ref} "
    spec.values["model.known"] = model.get("n_heads") is not None
