"""Hugging Face Accelerate: its ``accelerate config`` files, ``accelerate launch`` lines and
``PARALLELISM_CONFIG_*`` variables, read as a release builds its DeviceMesh.

One module per modelled release (``v1_15``: 1.15.0), each with its generated facts beside it
(``facts-<version>.toml``, by meshlint/generate/accelerate.py); a release is registered in
meshlint/frameworks/versions.py (``VERSIONS``). Adding the next release: copy the newest module, regenerate
its facts from the release's source, update what its code changed, add its Entry, and compare it with the
real release (tests/test_real_accelerate.py).
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


def version_module(version: str | None = None):
    from meshlint.frameworks import versions

    return versions.module(NAME, version or DEFAULT_VERSION)


def read(source):
    """The Spec of an accelerate config file (YAML or JSON), by the default release's semantics."""
    from meshlint.frameworks.accelerate.config_file import read_config

    return read_config(source, version_module())


def resolve(spec, world):
    return version_module(spec.framework.get("version") if spec.framework else None).resolve(spec, world)
