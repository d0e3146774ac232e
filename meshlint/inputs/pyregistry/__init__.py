"""Read torchtitan's Python config registries statically (``ast`` only) into ``PySource`` objects.

A torchtitan run today is a zero-argument function in a ``config_registry.py``
returning ``Trainer.Config``. This module never imports or runs that code: a small
abstract interpreter walks each function's body (literals, literal arithmetic,
locals, ``X.Config(...)`` constructors, attribute assignment, derivation from other
config functions of the same checkout, ``dataclasses.replace``, simple helpers,
``model_registry("70B")``) and records what it sets and where. Whatever it cannot
follow (reflection, unknown calls, loops over unknown values, conditions on
unknowns) becomes an ``Unknown`` with a reason and a position for exactly the
values it affects. Every exception is caught per function: no input gives a
traceback. Time is linear in what is read: derivations are evaluated once per
read and copied, and step budgets bound each function and each file.

What a config is, as torchtitan builds it (torchtitan/config/manager.py at b5bcd76c6):
``--config F`` calls ``F()`` with no arguments, then ``tyro.cli(default=...)``
constructs the result again, so the returned class's ``__post_init__`` sees the
final values; the reader runs it for RL's ``Controller.Config`` (which writes the
trainer's token counts) and for classes defined in the registry file. ``model_spec =
model_registry("70B", attn_backend=...)`` becomes ``data["model"] = {"name": <the
package under torchtitan/models/ or experiments/>, "flavor": "70B", "attn_backend": ...}``.
RL configs (``Controller.Config(trainer=...)``) are read at the trainer level
(``nested_under = "trainer"``). Comments are found with a regex scanner (tokenize
costs ~40x more; the tests check both agree on every real registry).

The parts, lowest first: ``values`` (the interpreter's values and bounds), ``pytext`` (decoding, comments),
``checkout`` (the checkout's modules, parsed lazily), ``frame`` (frames and shared helpers), the interpreter
in four parts put together by ``interp`` (``stmts``, ``exprs``, ``calls``, ``library``), ``build`` (values
to a ``PySource``), ``reader`` (the entry points re-exported here).
"""

from meshlint.inputs.pyregistry.checkout import Checkout, Module, Reader, _dotted_of, _parse_text, infer_root
from meshlint.inputs.pyregistry.frame import Frame, _Uncertain
from meshlint.inputs.pyregistry.interp import Interp
from meshlint.inputs.pyregistry.pytext import decode_python, scan_py_comments
from meshlint.inputs.pyregistry.reader import (RegistryFile, _read_text, clear_caches, find_config_module, read_function,
                                               read_registry)
from meshlint.inputs.pyregistry.values import (BUDGET_BASE, BUDGET_PER_BYTE, Builtin, ClassRef, FuncRef, Obj, Sym, U,
                                               _Limit, _Raise, _Return)

# the entry points, and the interpreter's parts a reader built on it (inputs/bridge_recipe.py) uses as one
# namespace
__all__ = ["BUDGET_BASE", "BUDGET_PER_BYTE", "Builtin", "Checkout", "ClassRef", "Frame", "FuncRef", "Interp", "Module",
           "Obj", "Reader", "RegistryFile", "Sym", "U", "_Limit", "_Raise", "_Return", "_Uncertain", "_dotted_of",
           "_parse_text", "_read_text", "clear_caches", "decode_python", "find_config_module", "infer_root",
           "read_function", "read_registry", "scan_py_comments"]
