"""The frameworks meshlint models: one package per framework, one module per version (registry.py registers them).

Importing this package loads nothing: the dialect modules are loaded by ``dialects`` (which framework reads a
file), a version's module by ``versions.module`` on first use.
"""
