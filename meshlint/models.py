"""Model facts: torchtitan's flavor table, user extensions, and parameter counts.

torchtitan configs name a model (``name``, ``flavor``) instead of stating its
sizes; the table in ``meshlint/data/models.toml`` supplies them. Users extend
or override it from ``[tool.meshlint.models]`` or a rule pack's ``models.toml``.
KempnerForge configs state their sizes; the same parameter count is computed
from them the way KempnerForge's ``num_params_estimate`` does.
"""

from __future__ import annotations

import os
import sys

from meshlint.errors import MeshlintError
from meshlint.limits import MAX_TOML_INT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "models.toml")
FIELDS = {"n_layers": int, "n_heads": int, "n_kv_heads": int, "dim": int, "head_dim": int, "vocab_size": int,
          "ffn_hidden_dim": int, "tied": bool, "num_experts": int, "top_k": int, "shared_experts": int,
          "moe_hidden_dim": int, "moe_layers": int, "attention": str, "params": int, "source": str, "note": str}
REQUIRED = ("n_layers", "n_heads", "dim", "vocab_size")

_BUILTIN_TABLE: dict | None = None


class ModelTableError(MeshlintError):
    """An invalid model table entry (exit 2), naming the file, model and flavor."""


def parse_table(data: dict, where: str) -> dict:
    """``{name: {flavor: facts}}`` -> ``{(name, flavor): facts}``, checked."""
    out = {}
    if not isinstance(data, dict):
        raise ModelTableError(f"{where}: the model table must be a table of [name.flavor] tables")
    for name, flavors in data.items():
        if not isinstance(flavors, dict):
            raise ModelTableError(f"{where}: [{name}] must hold [{name}.\"<flavor>\"] tables")
        for flavor, facts in flavors.items():
            if not isinstance(facts, dict):
                raise ModelTableError(f"{where}: {name}.{flavor} must be a table")
            for key, value in facts.items():
                expected = FIELDS.get(key)
                if expected is None:
                    import difflib

                    close = difflib.get_close_matches(key, list(FIELDS), n=1, cutoff=0.6)
                    hint = f" (did you mean '{close[0]}'?)" if close else f"; known: {', '.join(FIELDS)}"
                    raise ModelTableError(f"{where}: {name}.{flavor}: unknown key '{key}'{hint}")
                if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                    raise ModelTableError(f"{where}: {name}.{flavor}.{key} must be {expected.__name__}")
                if expected is int and value < (0 if key in ("shared_experts", "moe_layers") else 1):
                    raise ModelTableError(f"{where}: {name}.{flavor}.{key} must be positive")
                if expected is int and value > MAX_TOML_INT:  # TOML's 64-bit range; bounds every product below
                    raise ModelTableError(f"{where}: {name}.{flavor}.{key} must be at most {MAX_TOML_INT:,}")
            entry = dict(facts)
            entry.setdefault("n_kv_heads", entry.get("n_heads"))
            out[(name, flavor)] = entry
    return out


def load_file(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ModelTableError(f"{path}: cannot read the model table: {exc}") from None
    return parse_table(data, path)


def builtin() -> dict:
    """The shipped table; parsing it costs ~5 ms, so the parsed form is cached beside the rules."""
    global _BUILTIN_TABLE
    if _BUILTIN_TABLE is None:
        from meshlint import rule_cache

        key = rule_cache.key_for_files("models", [BUILTIN, os.path.abspath(__file__)])
        _BUILTIN_TABLE = rule_cache.load(key)
        if not isinstance(_BUILTIN_TABLE, dict):
            _BUILTIN_TABLE = load_file(BUILTIN)
            rule_cache.store(key, _BUILTIN_TABLE)
    return _BUILTIN_TABLE


def table_for(extra_dirs: tuple = (), configured: dict | None = None) -> dict:
    """The built-in table, then each rule pack's models.toml, then the project configuration."""
    merged = dict(builtin())
    for directory in extra_dirs:
        path = os.path.join(directory, "models.toml")
        if os.path.isfile(path):
            merged.update(load_file(path))
    if configured:
        merged.update(configured)
    return merged


def lookup(table: dict, name: str | None, flavor: str | None) -> dict | None:
    if name is None or flavor is None:
        return None
    return table.get((name, flavor))


def param_count(f: dict) -> int:
    """Total parameters from the architecture (within ~1% of the published sizes for GQA models)."""
    if "params" in f:
        return f["params"]
    if not f.get("n_heads"):
        return None  # a table entry without heads has no head size to count with
    d, hd = f["dim"], f.get("head_dim") or f["dim"] // f["n_heads"]
    attn = d * f["n_heads"] * hd * 2 + 2 * d * f["n_kv_heads"] * hd
    dense_ffn = 3 * d * f.get("ffn_hidden_dim", 4 * d)
    moe_layers = f.get("moe_layers", 0) if f.get("num_experts") else 0
    expert_ffn = 3 * d * f.get("moe_hidden_dim", 0)
    moe_ffn = f.get("num_experts", 0) * expert_ffn + f.get("shared_experts", 0) * expert_ffn + d * f.get("num_experts", 0)
    layers = (f["n_layers"] - moe_layers) * (attn + dense_ffn + 2 * d) + moe_layers * (attn + moe_ffn + 2 * d)
    return layers + f["vocab_size"] * d * (1 if f.get("tied") else 2) + d


def kempnerforge_ffn_hidden(dim: int, multiplier: float, explicit: int | None) -> int:
    """KempnerForge's ``computed_ffn_hidden_dim``."""
    if explicit is not None:
        return explicit
    try:
        raw = int(4 * dim * (2 / 3) * multiplier)
    except (OverflowError, ValueError):  # nan, inf, or a dim past float range: KempnerForge fails here too
        return None
    return 256 * -(-raw // 256)  # math.ceil(raw / 256), without the float that overflows


def kempnerforge_params(m: dict) -> int | None:
    """KempnerForge's ``ModelConfig.num_params_estimate``."""
    needed = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "ffn_hidden_dim", "num_experts")
    if any(m.get(k) is None for k in needed):
        return None
    d, h, kv = m["dim"], m["ffn_hidden_dim"], m["n_kv_heads"]
    if m["n_heads"] == 0:
        return None  # KempnerForge divides by it: no estimate
    head = d // m["n_heads"]
    attn = d * (m["n_heads"] * head) + 2 * d * (kv * head) + (m["n_heads"] * head) * d
    mlp = 3 * d * h
    norm = 2 * d
    if m["num_experts"] > 0:
        every = m.get("moe_frequency") or 1
        # layers i+1 (i < n_layers) divisible by every, counted without walking the layers
        n_moe = m["n_layers"] // abs(every) if m["n_layers"] > 0 else 0
        moe = attn + m["num_experts"] * mlp + d * m["num_experts"] + (m.get("moe_shared_experts") or 0) * mlp + norm
        layers = n_moe * moe + (m["n_layers"] - n_moe) * (attn + mlp + norm)
    else:
        layers = m["n_layers"] * (attn + mlp + norm)
    return layers + m["vocab_size"] * d + (0 if m.get("tie_embeddings") else m["vocab_size"] * d) + d
