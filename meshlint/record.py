"""``@record``: a class written like a ``typing.NamedTuple``, built as ``collections.namedtuple`` builds one.

Importing ``typing`` costs every first run about 17 M instructions (and ``typing.NamedTuple`` compiles
each field's annotation), and ``collections.namedtuple`` compiles a ``__new__`` for each class (~0.3 M
instructions; a check builds some thirty). Here one ``__new__`` is compiled per number of fields and
given each class's field names; the other methods are shared. The class body keeps its annotated
fields (with defaults, trailing), docstring, methods and constants; the result is a tuple subclass
with ``__slots__ = ()`` and what a named tuple has: the fields by name, ``_fields``,
``_field_defaults``, ``_make``, ``_replace``, ``_asdict``, ``__match_args__``, its repr and pickling.
tests/test_record.py compares it with ``collections.namedtuple``.
"""

from __future__ import annotations

# the C field accessor namedtuple uses, from its C module: importing collections costs a first run ~7 M instructions
from _collections import _tuplegetter

_NOT_COPIED = ("__dict__", "__weakref__", "__annotations__")
_NEW: dict = {}  # number of fields -> a compiled ``__new__`` whose argument names are replaced per class
_GLOBALS = {"_tuple_new": tuple.__new__, "__builtins__": {}}
_function = type(lambda: None)


def record(cls: type) -> type:
    """The named tuple type that ``cls``'s annotated fields describe, with ``cls``'s other members."""
    body = cls.__dict__
    fields = tuple(body.get("__annotations__", {}))
    defaults = tuple(body[name] for name in fields if name in body)
    if any(name in body for name in fields[:len(fields) - len(defaults)]):
        raise TypeError(f"{cls.__name__}: a field without a default follows one with a default")
    if not fields or any(not f.isidentifier() or f.startswith("_") for f in fields):
        raise TypeError(f"{cls.__name__}: fields must be identifiers not starting with '_'")
    namespace = {
        "__doc__": f"{cls.__name__}({', '.join(fields)})",
        "__slots__": (),
        "_fields": fields,
        "_field_defaults": dict(zip(fields[len(fields) - len(defaults):], defaults)),
        "__new__": _new(cls, fields, defaults),
        "_make": _make,
        "_replace": _replace,
        "__repr__": _repr,
        "_asdict": _asdict,
        "__getnewargs__": _getnewargs,
        "__match_args__": fields,
    }
    for index, name in enumerate(fields):
        namespace[name] = _tuplegetter(index, f"Alias for field number {index}")
    namespace.update((k, v) for k, v in body.items() if k not in fields and k not in _NOT_COPIED
                     and not (k == "__doc__" and v is None))
    new = type(cls.__name__, (tuple,), namespace)
    new.__qualname__ = cls.__qualname__
    return new


def _new(cls: type, fields: tuple, defaults: tuple):
    template = _NEW.get(len(fields))
    if template is None:
        args = ", ".join(f"a{i}" for i in range(len(fields)))
        template = _NEW[len(fields)] = eval(f"lambda _cls, {args}: _tuple_new(_cls, ({args},))", _GLOBALS).__code__
    names = {"co_varnames": ("_cls", *fields), "co_name": "__new__"}
    if hasattr(template, "co_qualname"):  # Python 3.11+: the name its errors give
        names["co_qualname"] = f"{cls.__qualname__}.__new__"
    code = template.replace(**names)
    fn = _function(code, _GLOBALS, "__new__", defaults or None)
    fn.__doc__ = f"Create new instance of {cls.__name__}({', '.join(fields)})"
    return fn


@classmethod
def _make(cls, iterable):
    """Make a new object from a sequence or iterable."""
    result = tuple.__new__(cls, iterable)
    if len(result) != len(cls._fields):
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
    return result


def _replace(self, /, **kwds):
    """Return a new object replacing the given fields with new values."""
    result = self._make(map(kwds.pop, self._fields, self))
    if kwds:
        raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
    return result


def _repr(self) -> str:
    return self.__class__.__name__ + "(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self)) + ")"


def _asdict(self) -> dict:
    """Return a new dict which maps field names to their values."""
    return dict(zip(self._fields, self))


def _getnewargs(self) -> tuple:
    """Return self as a plain tuple. Used by copy and pickle."""
    return tuple(self)
