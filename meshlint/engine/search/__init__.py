"""The rules solved for the degrees: every degree assignment of a config's framework version on a target world
that passes every error rule.

``space`` enumerates the assignments in closed form (divisor combinations), ``prune`` cuts them with the rules'
own verdicts on the degrees each rule reads, and ``valid`` gives the final verdict with the real rules on the real
resolution. It is part of the engine because the engine itself needs it: a finding's help line proposes only
degrees that appear in some layout passing every error rule (the ``choices`` fact, ``valid.degree_choices``).
``meshlint suggest`` and ``meshlint fix`` (meshlint/solve/) rank and apply what it finds.
"""
