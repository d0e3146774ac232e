"""torchtitan-0.2.x: its conditions and values as functions (generated from meshlint/data/schema/torchtitan-0.2.x.json,
sha256 203d3d451d473f5a, by python -m meshlint.generate.schema_compiled; do not edit).
"""

from meshlint.frameworks.schema_data import _h_local as _L, _h_attr as _A, _h_add as _add, _h_mul as _mul, _h_mod as _mod, _h_call as _call, _h_keys as _keys, _h_meth as _meth  # noqa: F401

COMPILED = {
    "self.context_parallel_load_balancer == ''": lambda V, L, K=('',): (V.get('context_parallel_load_balancer') == K[0]),
    'not (self.steps > 0 or self.steps == -1)': lambda V, L, K=(0, 1): (not ((V.get('steps') > K[0]) or (V.get('steps') == (-K[1])))),
}
