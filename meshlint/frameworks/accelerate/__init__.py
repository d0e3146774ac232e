"""Hugging Face Accelerate: its ``accelerate config`` files, ``accelerate launch`` lines and
``PARALLELISM_CONFIG_*`` variables, read as a release builds its DeviceMesh.

One module per modelled release (``v1_15``: 1.15.0), each with its generated facts beside it
(``facts-<version>.toml``, by meshlint/generate/accelerate.py); a release is registered in
meshlint/frameworks/registry.py (``VERSIONS``). Adding the next release: copy the newest module, regenerate
its facts from the release's source, update what its code changed, add its Entry and its branch in
``version_module`` (tests/test_registry.py holds the two equal), and compare it with the real release
(tests/test_real_accelerate.py).
"""

from __future__ import annotations

NAME = "accelerate"
SECTION = "parallelism_config"
TOML = False           # Accelerate reads YAML/JSON config files: never detected in a TOML file
DEFAULT_VERSION = "1.15.0"
# Top-level keys that only an `accelerate config` file has (what tells a YAML file is one)
MARKERS = ("compute_environment", "distributed_type", "parallelism_config")


def is_config(data) -> bool:
    return isinstance(data, dict) and any(k in data for k in MARKERS)


RELEASES = ("1.15.0",)  # the releases modelled, as frameworks/registry.py registers them (tests/test_registry.py)


def version_module(version: str | None = None):
    """The module that models ``version`` (a release id, as a Spec records it; the default release if None).

    Imported here by name rather than through versions.module: the registry's loaders import every dialect,
    this package among them, so asking them would close an import cycle."""
    version = version or DEFAULT_VERSION
    if version == "1.15.0":
        from meshlint.frameworks.accelerate import v1_15

        return v1_15
    from meshlint.errors import MeshlintError

    raise MeshlintError(f"accelerate {version!r} is not a version meshlint models ({', '.join(RELEASES)})")


def read(source):
    """The Spec of an accelerate config file (YAML or JSON), by the default release's semantics."""
    from meshlint.frameworks.accelerate.config_file import read_config

    return read_config(source, version_module())


def resolve(spec, world):
    return version_module(spec.framework.get("version") if spec.framework else None).resolve(spec, world)
