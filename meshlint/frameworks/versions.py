"""The framework versions meshlint models: which module reads each, what it models, how to tell them apart.

A version is a row in ``VERSIONS`` and a module with the dialect interface
(NAME, KEYS, read, resolve, attach_model, pipeline_plan, bytes_per_param,
spec_from_degrees). ``identify(root)`` tells which torchtitan semantics a
checkout or an installed package has from its code, never from its version
file (main's assets/version.txt still says 0.2.2). Modules are imported only
when asked for, so the static path pays for the one it uses.

Adding the next torchtitan version (say main at a later commit):
1. copy torchtitan_main.py to torchtitan_<id>.py; update VERSION/COMMIT/DATE,
   the KEYS (field, default, citation: tests/test_tt_versions.py checks every
   default against the dataclasses of the source), ``backends``,
   ``ep_must_divide``, ``checks``, ``MODELS``; a new mesh layout of a backend is
   one ``Layout`` row in torchtitan_registry.py;
2. add its Entry to VERSIONS in registry.py, and its markers to ``_SIGNATURES`` (what identify()
   tells it apart by) and ``_KEYS_OF`` if it renames keys;
3. limit the rules whose facts changed (``frameworks = [...]`` in the rule file)
   and add fixtures checked as the new version;
4. compare with its real ParallelDims (tests/test_real_torchtitan.py).
"""

from __future__ import annotations

import os

from meshlint.errors import MeshlintError


# the table itself lives in meshlint/frameworks/registry.py, with the frameworks: one place to register
from meshlint.frameworks.registry import TOML_ERA, TOML_VERSION, VERSIONED, VERSIONS, Entry  # noqa: F401 - read from here too


class VersionError(MeshlintError):
    """A framework version meshlint does not model (exit 2)."""


def ids(framework: str) -> list[str]:
    return [e.version for e in VERSIONS if e.framework == framework]


def entry(framework: str, version: str) -> Entry:
    canon = canonical(framework, version, strict=False)
    for e in VERSIONS:
        if e.framework == framework and e.version == canon:
            return e
    raise VersionError(f"{framework} {version!r} is not a version meshlint models "
                       f"({', '.join(ids(framework)) or 'none'})")


def canonical(framework: str, value: str | None, strict: bool = True) -> str | None:
    """The id for ``value`` (``b5bcd76c6`` -> ``main@b5bcd76c6``); None when not modelled.

    ``strict``: only the ids themselves; otherwise also the aliases, a leading ``v`` and
    any prefix of at least 7 characters of a modelled commit.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    rows = [e for e in VERSIONS if e.framework == framework]
    for e in rows:
        if text == e.version:
            return e.version
    if strict:
        return None
    low = text.lower()
    for e in rows:
        if low in (a.lower() for a in e.aliases) or low == e.version.lower():
            return e.version
    sha = low.split("@", 1)[-1]
    if len(sha) >= 7 and all(c in "0123456789abcdef" for c in sha):
        for e in rows:
            if e.commit.startswith(sha) or (len(e.commit) >= 7 and sha.startswith(e.commit)):
                return e.version
    return None


def module(framework: str, version: str):
    """The dialect module that models ``framework`` at ``version`` (imported on first use)."""
    from meshlint.modules import import_module

    return import_module(entry(framework, version).module)


def version_module(spec):
    """The module of the version a Spec of a versioned framework was read with, or None (no version recorded, or
    one not known): then its dialect's module stands (``dialects.module_of``, what callers use)."""
    fw = getattr(spec, "framework", None) or {}
    if fw.get("version") and fw.get("name") in VERSIONED:
        canon = canonical(fw["name"], fw["version"], strict=False)
        if canon is not None:
            return module(fw["name"], canon)
    return None


def spec_from_degrees(framework: str, version: str, degrees: dict, **other_values):
    """``module(framework, version).spec_from_degrees``; a module without one gets v0.2.x's (a [parallelism] table)."""
    mod = module(framework, version)
    if not hasattr(mod, "spec_from_degrees"):
        mod = module("torchtitan", "0.2.x")
    return mod.spec_from_degrees(degrees, **other_values)


# ----------------------------------------------------------------------------- telling versions apart

_MARKERS = {
    # name: (file under the torchtitan package, regex)
    "etp": ("distributed/parallel_dims.py", r"^\s+etp\s*:\s*int"),
    "etp_key": ("config/job_config.py", r"expert_tensor_parallel_degree"),
    "spmd_backend": ("distributed/parallel_dims.py", r"^\s+spmd_backend\s*:"),
    "full_dtensor": ("distributed/parallel_dims.py", r"""["']full_dtensor["']"""),
    "ep_check": ("distributed/parallel_dims.py", r"must divide\s*\"\s*f?\"dp_shard \* cp \* tp|% ep != 0"),
    "tokens": ("config/configs.py", r"^\s+num_tokens_per_microbatch_per_dp_rank\s*:"),
    "local_batch": ("config/configs.py", r"^\s+local_batch_size\s*:"),
    # v0.1.0: JobConfig and ConfigManager in one module, and a ParallelDims without ep
    "config_manager": ("config_manager.py", r"^class ConfigManager\b"),
    "ep": ("distributed/parallel_dims.py", r"^\s+ep\s*:\s*int"),
}
_DESCRIBE = {
    "etp": "ParallelDims has an etp field", "etp_key": "the TOML JobConfig has expert_tensor_parallel_degree",
    "spmd_backend": "ParallelDims has spmd_backend", "full_dtensor": "spmd_backend offers full_dtensor",
    "ep_check": "ParallelDims checks that ep divides dp_shard * cp * tp",
    "tokens": "TrainingConfig has num_tokens_per_microbatch_per_dp_rank",
    "local_batch": "TrainingConfig has local_batch_size",
    "config_manager": "torchtitan/config_manager.py holds ConfigManager (and JobConfig)",
    "ep": "ParallelDims has an ep field",
}
# what each modelled registry-era version has (True) and lacks (False)
_SIGNATURES = {
    "main@b5bcd76c6": {"spmd_backend": True, "full_dtensor": False, "ep_check": True, "tokens": True,
                       "local_batch": False},
    "0.3.0": {"spmd_backend": True, "full_dtensor": True, "ep_check": False, "tokens": False, "local_batch": True},
}


def package_dir(root: str) -> str | None:
    """The ``torchtitan`` package directory of a checkout root, a site-packages dir, or the package itself."""
    if not root:
        return None
    for candidate in (os.path.join(root, "torchtitan"), root):
        if os.path.isfile(os.path.join(candidate, "distributed", "parallel_dims.py")):
            return candidate
    return None


def _scan(pkg: str) -> dict:
    """marker -> (relative file, line) where it is found, or None."""
    texts: dict = {}
    found: dict = {}
    for name, (rel, pattern) in _MARKERS.items():
        if rel not in texts:
            try:
                with open(os.path.join(pkg, rel), encoding="utf-8", errors="replace") as f:
                    texts[rel] = f.read(2_000_000)
            except OSError:
                texts[rel] = None
        text = texts[rel]
        match = _search_lines(pattern, text) if text else None
        found[name] = (rel, text.count("\n", 0, match.start()) + 1) if match else None
    return found


def identify(root: str) -> tuple:
    """(version id or None, evidence): which modelled semantics the torchtitan code at ``root`` has.

    A TOML-era tree is 0.2.x (ETP), or 0.1.0 (torchtitan/config_manager.py and a ParallelDims without
    ep). A registry-era tree (config/configs.py, the Python dataclass configs of
    9810191bb onward) is always read as the nearest registry-era version, however far its code has
    moved: the config keys it uses weigh most (they decide what a config may set), then its
    ParallelDims. What the nearest version does not model is ``unmodelled(root, version)``'s answer."""
    pkg = package_dir(root)
    if pkg is None:
        return None, f"no torchtitan/distributed/parallel_dims.py under {root}"
    found = _scan(pkg)

    def said(name: str) -> str:
        where = found.get(name)
        return (f"{_DESCRIBE[name]} (torchtitan/{where[0]}:{where[1]})" if where
                else f"no: {_DESCRIBE[name]}")

    registry = _registry_era(pkg)
    if not registry and (found["etp"] or found["etp_key"]):
        which = "etp" if found["etp"] else "etp_key"
        return "0.2.x", said(which) + _version_file_note(root, pkg, "0.2.x")
    if not registry and found["config_manager"] and not found["ep"]:
        return "0.1.0", (said("config_manager") + "; ParallelDims has no ep field (torchtitan/"
                         "distributed/parallel_dims.py)" + _version_file_note(root, pkg, "0.1.0"))
    if not registry and found["config_manager"]:
        return None, (said("config_manager") + "; " + said("ep") + ": between v0.1.0 and v0.2.x (expert "
                      "parallelism without ETP), which meshlint does not model (0.1.0, 0.2.x, 0.3.0, main@b5bcd76c6)")
    if not registry and not found["spmd_backend"]:
        return None, ("neither the registry-era configs (torchtitan/config/configs.py) nor ETP nor spmd_backend "
                      "nor v0.1.0's config_manager.py: older than the versions meshlint models (0.1.0, 0.2.x, 0.3.0, "
                      "main@b5bcd76c6)")
    scores, matched = {}, {}
    for version, signature in _SIGNATURES.items():
        matched[version] = [name for name, want in signature.items() if bool(found[name]) == want]
        scores[version] = sum(_WEIGHT.get(name, 1) for name in matched[version])
    # ties go to the later version (the default one): its keys are the ones written today
    best = max(scores, key=lambda v: (scores[v], v == DEFAULT_REGISTRY))
    evidence = "; ".join(said(n) if found[n] else _lacks(n) for n in _SIGNATURES[best])
    if len(matched[best]) == len(_SIGNATURES[best]):
        return best, evidence + _version_file_note(root, pkg, best)
    return best, (f"nearest modelled version (the code matches it on {len(matched[best])} of "
                  f"{len(_SIGNATURES[best])} points: {evidence})")


DEFAULT_REGISTRY = "main@b5bcd76c6"
# the config keys a version's TrainingConfig has decide more than its ParallelDims does
_WEIGHT = {"tokens": 2, "local_batch": 2}


_ERA: dict = {}


def _registry_era(pkg: str) -> bool:
    """Whether the package holds the Python dataclass configs of the registry era (9810191bb onward)."""
    if pkg not in _ERA:
        _ERA[pkg] = _has_registry_configs(pkg)
    return _ERA[pkg]


def _has_registry_configs(pkg: str) -> bool:
    config = os.path.join(pkg, "config")
    try:  # configs.py since 9810191bb; any module of the config package should it move
        names = ["configs.py"] + sorted(n for n in os.listdir(config) if n.endswith(".py") and n != "configs.py")
    except OSError:
        return False
    for name in names[:64]:
        text = _read_text(os.path.join(config, name))
        if text and _search_lines(r"^class ParallelismConfig\b", text):
            return True
    return False


def _search_lines(pattern: str, text: str):
    """``re.search`` with ``re.MULTILINE``; re is imported here, not by every run that imports this module."""
    import re

    return re.search(pattern, text, re.MULTILINE)


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(2_000_000)
    except OSError:
        return None


def _lacks(name: str) -> str:
    return {"full_dtensor": "spmd_backend has no full_dtensor", "ep_check": "no ep check in ParallelDims",
            "tokens": "no num_tokens_per_microbatch_per_dp_rank", "local_batch": "no local_batch_size",
            "spmd_backend": "no spmd_backend"}[name]


def _version_file_note(root: str, pkg: str, version: str) -> str:
    """Says so when the checkout's version file disagrees with its code (main's says 0.2.2)."""
    for path in (os.path.join(root, "assets", "version.txt"), os.path.join(os.path.dirname(pkg), "assets",
                                                                           "version.txt")):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                said = f.read(100).strip()
        except OSError:
            continue
        if said and canonical("torchtitan", said, strict=False) != version:
            return f" (its assets/version.txt says {said}, which the code contradicts)"
        return ""
    return ""


# keys only one registry-era version has (a config written for one fails on the other)
_KEYS_OF = {
    "main@b5bcd76c6": ("training.num_tokens_per_microbatch_per_dp_rank", "training.num_tokens_per_train_step",
                       "training.max_context_length", "parallelism.num_pp_microbatches"),
    "0.3.0": ("training.local_batch_size", "training.global_batch_size", "training.seq_len",
              "parallelism.pipeline_parallel_microbatch_size"),
}


def from_keys(framework: str, data: dict) -> tuple | None:
    """(version, how decided) from the keys a registry config itself sets, when they single one out."""
    if framework != "torchtitan" or not isinstance(data, dict):
        return None
    hits = {}
    for version, keys in _KEYS_OF.items():
        hits[version] = [k for k in keys if _has(data, k)]
    backend = data.get("parallelism", {}).get("spmd_backend") if isinstance(data.get("parallelism"), dict) else None
    if backend == "full_dtensor":
        hits["0.3.0"].append("parallelism.spmd_backend = 'full_dtensor'")
    matched = [v for v, keys in hits.items() if keys]
    if len(matched) != 1:
        return None
    version = matched[0]
    return version, (f"the config's own keys: {', '.join(hits[version])} (only torchtitan {version} "
                     f"of the modelled versions has {'it' if len(hits[version]) == 1 else 'them'})")


def _has(data: dict, path: str) -> bool:
    node = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
