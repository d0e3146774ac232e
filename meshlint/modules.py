"""``import_module``: ``importlib.import_module`` for an absolute name, without importing ``importlib``.

The ``importlib`` package (and the ``warnings`` it imports) costs a first run ~2 M instructions; the
modules meshlint loads on first need (a dialect, a schema's compiled checks, a framework version) need
only the import statement's own machinery.
"""

from __future__ import annotations

import sys


def import_module(name: str):
    """The module ``name`` (absolute, dotted), imported if it is not yet."""
    module = sys.modules.get(name)
    if module is None:
        __import__(name)
        module = sys.modules[name]
    return module
