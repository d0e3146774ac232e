"""Searching the parallel layouts of a config: every degree assignment meshlint's error rules accept, ranked.

``space`` enumerates the degree assignments of a framework version for a target world in closed
form (divisor combinations), ``prune`` cuts them with the rules' own verdicts on the degrees each
rule reads, ``valid`` gives the final verdict with the real rules on the real resolution, and
``cost`` ranks what is left. ``valid.valid_layouts`` and ``valid.degree_choices`` are the public
entry points; ``meshlint suggest`` and ``meshlint fix`` are built on them.
"""

# Exported lazily: `check` prices a config's memory with solve.cost, which must not load the search (valid, copy,
# suppress) on the way.
_EXPORTS = {"Target": "meshlint.solve.space", "Solver": "meshlint.solve.valid",
            "degree_choices": "meshlint.solve.valid", "valid_layouts": "meshlint.solve.valid"}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'meshlint.solve' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
