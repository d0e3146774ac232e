"""Config dialects: which framework reads a file, decided by its sections (``DIALECTS``: name -> dialect module)."""

from __future__ import annotations

from meshlint.errors import InputError
from meshlint.frameworks.registry import FRAMEWORKS, VERSIONED
from meshlint.modules import import_module


class _Dialects:
    """name -> dialect module, each imported on first use: a KempnerForge run never imports the others.

    A read-only mapping written out rather than a ``collections.abc.Mapping``, and modules imported with
    meshlint.modules rather than ``importlib``: those imports cost a first run ~3 M instructions."""

    def __init__(self) -> None:
        self._modules = {f.name: f.module for f in FRAMEWORKS if f.module}
        self._loaded: dict = {}

    def __getitem__(self, name: str):
        module = self._loaded.get(name)
        if module is None:
            module = self._loaded[name] = import_module(self._modules[name])
        return module

    def get(self, name: str, default=None):
        return self[name] if name in self._modules else default

    def __contains__(self, name) -> bool:
        return name in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return [(name, self[name]) for name in self._modules]

    def values(self):
        return [self[name] for name in self._modules]

    def __iter__(self):
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


DIALECTS = _Dialects()
NAMES = tuple(DIALECTS)


def module_of(spec):
    """The module whose semantics a Spec was read with: its recorded version's, else its dialect's. The version
    table is imported only for a spec of a versioned framework: a KempnerForge check never needs it."""
    if (getattr(spec, "framework", None) or {}).get("name") in VERSIONED:
        from meshlint.frameworks.versions import version_module

        found = version_module(spec)
        if found is not None:
            return found
    return DIALECTS[spec.dialect]


def detect(data: dict) -> str | None:
    """The dialect whose identifying section the file has; None when it has none.

    A file with sections of two dialects is an error, not a guess.
    """
    found = [f.name for f in FRAMEWORKS if f.module and f.section is not None and f.section in data]
    if len(found) > 1:
        sections = " and ".join(f"[{DIALECTS[n].SECTION}] ({n})" for n in found)
        raise InputError("ML004", f"file has both {sections} sections; cannot tell which framework reads it",
                         help="split it into one file per framework, or pass --dialect to choose")
    return found[0] if found else None


# torchtitan before v0.1.0 (2024): the degrees sat in [training] (and pipeline_parallel_degree in [experimental])
_OLD_TORCHTITAN = {"training": ("data_parallel_degree", "data_parallel_replicate_degree", "data_parallel_shard_degree",
                                "tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree"),
                   "experimental": ("pipeline_parallel_degree", "context_parallel_degree")}


def older_torchtitan(data: dict) -> list:
    """The keys that make ``data`` a torchtitan config from before v0.1.0 (a [job], [model] and [training]
    config with its degrees in [training]), which meshlint does not model; [] when it is not one."""
    if not all(isinstance(data.get(s), dict) for s in ("job", "model", "training")) or "parallelism" in data:
        return []
    found = [f"training.{k}" for k in _OLD_TORCHTITAN["training"] if k in data["training"]]
    if not found:
        return []
    experimental = data.get("experimental")
    if isinstance(experimental, dict):
        found += [f"experimental.{k}" for k in _OLD_TORCHTITAN["experimental"] if k in experimental]
    return found
