"""``@record``: a class written like a ``typing.NamedTuple``, built as a ``collections.namedtuple``.

Importing ``typing`` costs every first run about 17 M instructions (and ``typing.NamedTuple`` compiles
each field's annotation); ``collections`` is loaded by every Python process. The class body keeps its
annotated fields (with defaults, trailing), docstring, methods and constants; the result is a tuple
subclass with ``__slots__ = ()``, the same fields, ``_replace``, ``_asdict``, ``_fields`` and repr.
"""

from __future__ import annotations

from collections import namedtuple

_NOT_COPIED = ("__dict__", "__weakref__", "__annotations__")


def record(cls: type) -> type:
    """The named tuple type that ``cls``'s annotated fields describe, with ``cls``'s other members."""
    body = cls.__dict__
    fields = tuple(body.get("__annotations__", {}))
    defaults = [body[name] for name in fields if name in body]
    if any(name in body for name in fields[:len(fields) - len(defaults)]):
        raise TypeError(f"{cls.__name__}: a field without a default follows one with a default")
    base = namedtuple(cls.__name__, fields, defaults=defaults or None, module=cls.__module__)
    members = {k: v for k, v in body.items() if k not in fields and k not in _NOT_COPIED}
    members["__slots__"] = ()
    new = type(cls.__name__, (base,), members)
    new.__qualname__ = cls.__qualname__
    return new
