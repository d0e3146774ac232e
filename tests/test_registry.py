"""Frameworks and versions are registered in one place (meshlint/frameworks/registry.py) and read from there."""

from __future__ import annotations

import importlib

from meshlint.cli import check_args
from meshlint.engine import rules
from meshlint.frameworks import registry, versions
from meshlint.frameworks.dialects import DIALECTS


def test_every_registered_framework_is_a_dialect_module_of_that_name():
    # a framework read from launch lines only (Megatron-LM) has no dialect module: its version module reads it
    assert list(DIALECTS) == [f.name for f in registry.FRAMEWORKS if f.module]
    for f in registry.FRAMEWORKS:
        if f.module:
            assert DIALECTS[f.name].NAME == f.name
            module = DIALECTS[f.name]  # detection reads the registry's section, never the module
            assert f.section == (module.SECTION if getattr(module, "TOML", True) else None)
            assert f.module.startswith(f"meshlint.frameworks.{f.name}")


def test_every_registered_version_is_a_module_of_its_framework_package():
    names = {f.name for f in registry.FRAMEWORKS}
    for e in registry.VERSIONS:
        assert e.framework in names
        assert e.module.startswith(f"meshlint.frameworks.{e.framework}.")
        assert importlib.import_module(e.module) is versions.module(e.framework, e.version)


def test_the_click_free_dialect_choices_are_the_registered_ones():
    # meshlint/cli/check_args.py reads the registry itself, on first use (a plain check never imports it)
    assert check_args.DIALECTS == tuple(f.name for f in registry.FRAMEWORKS if f.cli_choice)


def test_rule_files_may_name_exactly_the_registered_dialects():
    assert rules._dialect_names() == tuple(f.name for f in registry.FRAMEWORKS)


def test_the_accelerate_package_finds_the_registered_releases():
    # frameworks/accelerate imports its release modules by name (through versions.module it would close an
    # import cycle): they are the registry's, one for one
    from meshlint.frameworks import accelerate

    registered = {e.version: e.module for e in registry.VERSIONS if e.framework == "accelerate"}
    assert set(accelerate.RELEASES) == set(registered)
    for version, module in registered.items():
        assert accelerate.version_module(version) is importlib.import_module(module)
    assert accelerate.version_module() is versions.module("accelerate", accelerate.DEFAULT_VERSION)
