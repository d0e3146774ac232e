"""The values of the registry reader's abstract interpreter, the bounds on them, and its control-flow signals."""

from __future__ import annotations

from meshlint.inputs.pysource import Unknown


MAX_BYTES = 16 * 1024 * 1024        # same file-size limit as TOML sources
MAX_INT = 10 ** 18                  # larger integers are not a training config; they become Unknown
MAX_SEQ = 100_000                   # longest string built by arithmetic
MAX_ITEMS = 10_000                  # longest list / tuple / dict (every derivation copies them)
MAX_STEPS = 20_000                  # statements + expressions evaluated per config function (HEAD: <500)
BUDGET_BASE = 50_000                # ... and per file: time stays linear in the file's size
BUDGET_PER_BYTE = 4                 # (HEAD's registries use at most 0.5 step per byte)
MAX_CALL_DEPTH = 16                 # helper / derivation nesting
MAX_UNROLL = 256                    # iterations of a loop over a known sequence
MAX_VALUE_DEPTH = 40                # nesting of values copied or flattened
MAX_HELPER_MODULE_BYTES = 256 * 1024  # other modules of the checkout parsed to follow a helper
MAX_HELPER_BYTES_TOTAL = 2 * 1024 * 1024

_REFLECTION = {"getattr", "setattr", "delattr", "hasattr", "vars", "type", "globals", "locals",
               "eval", "exec", "compile", "__import__", "super", "dataclasses.fields",
               "dataclasses.asdict", "dataclasses.astuple", "fields", "asdict", "importlib.import_module",
               "operator.attrgetter", "copy.replace"}
_MUTATING = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add",
             "discard", "sort", "reverse", "popitem", "__setitem__", "__setattr__", "__delitem__"}
_TRANSPARENT_DECORATORS = {"functools.cache", "functools.lru_cache", "cache", "lru_cache", "functools.wraps"}


# -----------------------------------------------------------------------------
# Values of the abstract interpreter
# -----------------------------------------------------------------------------
class U:
    """An unknown value (internal form of ``Unknown``)."""

    __slots__ = ("reason", "line", "col", "file", "noted")

    def __init__(self, reason: str, line: int, col: int, file: str, noted: bool = False):
        self.reason, self.line, self.col, self.file = reason, line, col, file
        self.noted = noted      # the reason already says where it arose

    def public(self) -> Unknown:
        return Unknown(self.reason, self.line, self.col, self.file)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"U({self.reason!r} @{self.line}:{self.col})"


class SpecPart(U):
    """``<model spec>.model`` or ``<model spec>.model.layers``: unknown like any model-spec internal, except
    that ``len()`` of the layers is the flavor's layer count (``LayerCount``)."""

    __slots__ = ("name", "flavor", "part")

    def __init__(self, reason: str, line: int, col: int, file: str, name, flavor, part: str):
        super().__init__(reason, line, col, file)
        self.name, self.flavor, self.part = name, flavor, part


class LayerCount(U):
    """``len(<model spec>.model.layers)``: the number of layers of model ``name``'s flavor ``flavor``. Unknown to
    everything but ``nvfp4_bf16_tail_fqns`` (its count comes from meshlint's model table, by the dialect)."""

    __slots__ = ("name", "flavor")

    def __init__(self, reason: str, line: int, col: int, file: str, name: str, flavor: str):
        super().__init__(reason, line, col, file)
        self.name, self.flavor = name, flavor


class TailFqns(U):
    """``nvfp4_bf16_tail_fqns(num_layers, bf16_tail_fraction)`` (torchtitan/components/quantization/nvfp4.py):
    the list it returns, or the ValueError it raises, is decided by rules (ML915, ML916) from ``call``:
    {function, num_layers (int, or None with layers_of {name, flavor}), bf16_tail_fraction, line, col}.
    Unknown to everything else."""

    __slots__ = ("call",)

    def __init__(self, reason: str, line: int, col: int, file: str, call: dict):
        super().__init__(reason, line, col, file)
        self.call = call


TAIL_FQNS = "torchtitan.components.quantization.nvfp4.nvfp4_bf16_tail_fqns"


class Obj:
    """An instance of a config dataclass: the fields set explicitly, and what the rest is.

    ``rest`` None: every field not listed is the class default. ``rest`` a U: the
    fields not listed are unknown (positional arguments, ``**unknown``, an unknown
    object written into).
    """

    __slots__ = ("cls", "ref", "fields", "pos", "rest", "kind", "module", "ref_mod")

    def __init__(self, cls: str | None, ref=None, rest: U | None = None, kind: str | None = None,
                 ref_mod=None):
        self.cls = cls          # class as written: "Trainer.Config"
        self.ref = ref          # the callee value, to decide the kind lazily
        self.ref_mod = ref_mod  # the module the constructor was written in
        self.fields: dict = {}
        self.pos: dict = {}
        self.rest = rest
        self.kind = kind        # "model" for model_registry(...); trainer/controller decided lazily
        self.module = None      # model objects: the dotted package of model_registry


class FuncRef:
    __slots__ = ("mod", "node", "closure")

    def __init__(self, mod, node, closure=None):
        self.mod, self.node, self.closure = mod, node, closure


class ClassRef:
    __slots__ = ("mod", "node", "display")

    def __init__(self, mod, node, display: str):
        self.mod, self.node, self.display = mod, node, display


class Sym:
    """A name imported from a module, resolved only when needed (lazy: parsing costs time)."""

    __slots__ = ("parts", "modlen", "orig")

    def __init__(self, parts: tuple, modlen: int, orig: str):
        self.parts = parts      # full dotted path ("torchtitan", "trainer", "Trainer", "Config")
        self.modlen = modlen    # how many leading parts name the module it was imported from
        self.orig = orig        # display as written in the file: "Trainer.Config"

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)

    def attr(self, name: str) -> Sym:
        return Sym(self.parts + (name,), self.modlen, f"{self.orig}.{name}")


class ModuleVal:
    __slots__ = ("mod",)

    def __init__(self, mod):
        self.mod = mod


class Builtin:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class Method:
    __slots__ = ("recv", "name", "recv_node")

    def __init__(self, recv, name: str, recv_node):
        self.recv, self.name, self.recv_node = recv, name, recv_node


_LITERAL = (bool, int, float, complex, str, bytes, type(None))
_LITERAL_TYPES = frozenset(_LITERAL)
_BUILTINS = {"len", "min", "max", "abs", "int", "float", "str", "bool", "list", "tuple", "dict", "set",
             "frozenset", "sorted", "sum", "range", "round", "isinstance", "issubclass", "print", "any",
             "all", "zip", "enumerate", "reversed", "repr", "divmod", "pow", "callable", "ValueError",
             "TypeError", "KeyError", "RuntimeError", "AssertionError", "NotImplementedError", "Exception",
             "None", "True", "False", "map", "filter", "iter", "next", "id", "hash", "format", "open", "input",
             "getattr", "setattr", "delattr", "hasattr", "vars", "type", "globals", "locals", "eval", "exec",
             "compile", "__import__", "super", "object", "property", "staticmethod", "classmethod"}


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Raise(Exception):
    """The function raises here at run time (unconditionally, as far as it is followed)."""

    def __init__(self, unknown: U):
        self.unknown = unknown


class _Limit(Exception):
    """A documented bound was hit (steps, depth); the function becomes unknown."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


# -----------------------------------------------------------------------------
# Source text: decoding, comments, positions


class _Snap:
    __slots__ = ("value", "rel", "path")

    def __init__(self, value, rel: str, path: str):
        self.value, self.rel, self.path = value, rel, path
