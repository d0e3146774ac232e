"""Proposing and applying layouts: ``suggest`` ranks the layouts the rule engine's search finds
(``meshlint.engine.search``) by the cost model (``meshlint.estimate.cost``), keeping the training recipe
(``batch``); ``fix`` and ``fix_launch`` write the chosen degrees back into the user's config or launch line,
atomically (``edits``).

``Target``, ``Solver``, ``degree_choices`` and ``valid_layouts`` are re-exported from the search, lazily, so that
importing this package loads nothing.
"""

_EXPORTS = {"Target": "meshlint.engine.search.space", "Solver": "meshlint.engine.search.valid",
            "degree_choices": "meshlint.engine.search.valid", "valid_layouts": "meshlint.engine.search.valid"}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'meshlint.solve' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
