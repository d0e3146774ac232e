"""``class X(Record)``: a class written like a ``typing.NamedTuple``, built as ``collections.namedtuple`` builds one.

Importing ``typing`` costs every first run about 17 M instructions (and ``typing.NamedTuple`` compiles
each field's annotation), and ``collections.namedtuple`` compiles a ``__new__`` for each class (~0.3 M
instructions; a check builds some thirty). Here the ``__new__`` of each number of fields is compiled with
this module and given each class's field names; the other methods are shared; the class statement builds the
named tuple type itself (a metaclass), not a class and then another. The class body keeps its annotated
fields (with defaults, trailing), docstring, methods and constants; the result is a tuple subclass
with ``__slots__ = ()`` and what a named tuple has: the fields by name, ``_fields``,
``_field_defaults``, ``_make``, ``_replace``, ``_asdict``, ``__match_args__``, its repr and pickling.
tests/test_record.py compares it with ``collections.namedtuple``.
"""

from __future__ import annotations

# the C field accessor namedtuple uses, from its C module: importing collections costs a first run ~7 M instructions
from _collections import _tuplegetter

_GLOBALS = {"_tuple_new": tuple.__new__, "__builtins__": {}}
_function = type(lambda: None)


class _RecordType(type):
    """The metaclass of :class:`Record`: a class statement deriving from Record becomes the named tuple type itself
    (one type built, where a decorator would get a finished class and build another: ~0.1 M instructions each)."""

    def __new__(mcs, name: str, bases: tuple, body: dict):
        if not bases:  # Record itself
            return super().__new__(mcs, name, bases, body)
        if bases != (Record,):
            raise TypeError(f"{name}: a record derives from Record alone")
        return _build(name, body.get("__qualname__", name), body)


class Record(metaclass=_RecordType):
    """``class Finding(Record):`` with annotated fields (defaults trailing): the class statement gives the named
    tuple type (a subclass of tuple, not of Record)."""


def _build(name: str, qualname: str, body) -> type:
    # plain loops, not generator expressions: each is a frame of its own, and a check builds some thirty records
    fields = tuple(body.get("__annotations__", ()))
    if not fields:
        raise TypeError(f"{name}: fields must be identifiers not starting with '_'")
    defaults = []
    for field in fields:
        if field in body:
            defaults.append(body[field])
        elif defaults:
            raise TypeError(f"{name}: a field without a default follows one with a default")
    for field in fields:
        if not field.isidentifier() or field[0] == "_":
            raise TypeError(f"{name}: fields must be identifiers not starting with '_'")
    defaults = tuple(defaults)
    namespace = {
        "__doc__": f"{name}({', '.join(fields)})",
        "__slots__": (),
        "_fields": fields,
        "_field_defaults": dict(zip(fields[len(fields) - len(defaults):], defaults)),
        "__new__": _new(name, qualname, fields, defaults),
        "_make": _make,
        "_replace": _replace,
        "__repr__": _repr,
        "_asdict": _asdict,
        "__getnewargs__": _getnewargs,
        "__match_args__": fields,
    }
    for index, field in enumerate(fields):
        namespace[field] = _tuplegetter(index, f"Alias for field number {index}")
    for k, v in body.items():
        if k not in fields and k != "__annotations__" and not (k == "__doc__" and v is None):
            namespace[k] = v
    new = type(name, (tuple,), namespace)
    new.__qualname__ = qualname
    return new


# ``__new__`` for 1 to 40 fields, compiled with this module (a first run compiling them at run time paid ~0.4 M
# instructions each; memory.Shape has 33); each class gets one with its own argument names (``code.replace``). More
# fields: compiled then (tests/test_record.py keeps meshlint's own records within the table).
_tuple_new = tuple.__new__
_TEMPLATES = (
    lambda _cls, a0: _tuple_new(_cls, (a0,)),
    lambda _cls, a0, a1: _tuple_new(_cls, (a0, a1,)),
    lambda _cls, a0, a1, a2: _tuple_new(_cls, (a0, a1, a2,)),
    lambda _cls, a0, a1, a2, a3: _tuple_new(_cls, (a0, a1, a2, a3,)),
    lambda _cls, a0, a1, a2, a3, a4: _tuple_new(_cls, (a0, a1, a2, a3, a4,)),
    lambda _cls, a0, a1, a2, a3, a4, a5: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37, a38: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37, a38,)),
    lambda _cls, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37, a38, a39: _tuple_new(_cls, (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37, a38, a39,)),
)


def _new(name: str, qualname: str, fields: tuple, defaults: tuple):
    if len(fields) <= len(_TEMPLATES):
        template = _TEMPLATES[len(fields) - 1].__code__
    else:
        args = ", ".join(f"a{i}" for i in range(len(fields)))
        template = eval(f"lambda _cls, {args}: _tuple_new(_cls, ({args},))", _GLOBALS).__code__
    names = {"co_varnames": ("_cls", *fields), "co_name": "__new__"}
    if hasattr(template, "co_qualname"):  # Python 3.11+: the name its errors give
        names["co_qualname"] = f"{qualname}.__new__"
    code = template.replace(**names)
    fn = _function(code, _GLOBALS, "__new__", defaults or None)
    fn.__doc__ = f"Create new instance of {name}({', '.join(fields)})"
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
