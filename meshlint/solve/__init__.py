"""Searching the parallel layouts of a config: every degree assignment meshlint's error rules accept, ranked.

``space`` enumerates the degree assignments of a framework version for a target world in closed
form (divisor combinations), ``prune`` cuts them with the rules' own verdicts on the degrees each
rule reads, ``valid`` gives the final verdict with the real rules on the real resolution, and
``cost`` ranks what is left. ``valid.valid_layouts`` and ``valid.degree_choices`` are the public
entry points; ``meshlint suggest`` and ``meshlint fix`` are built on them.
"""

from meshlint.solve.space import Target  # noqa: F401
from meshlint.solve.valid import Solver, degree_choices, valid_layouts  # noqa: F401
