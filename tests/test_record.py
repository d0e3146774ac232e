"""Record classes behave as the named tuples they replace (collections.namedtuple, typing.NamedTuple)."""

from __future__ import annotations

import copy
import pickle
from collections import namedtuple
from pathlib import Path

import pytest

from meshlint.mesh.devmesh import Mesh
from meshlint.record import Record


class Point(Record):
    """A point."""

    x: int
    y: int = 0
    label: str = "p"

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


Plain = namedtuple("Point", "x y label", defaults=(0, "p"))


def _both(make):
    return make(Point), make(Plain)


def test_a_class_statement_deriving_from_record_builds_the_same_named_tuple():
    """``class X(Record)`` gives a tuple subclass, not a Record, built once, with what a named tuple has."""
    p = Point(1, -2)
    assert type(p).__mro__ == (Point, tuple, object) and not isinstance(p, Record)
    assert tuple(p) == (1, -2, "p") and repr(p) == repr(Plain(1, -2)) and p.norm1() == 3
    assert Point._fields == Plain._fields and Point._field_defaults == Plain._field_defaults
    assert Point.__doc__ == "A point." and Point.__qualname__ == "Point" and Point.__module__ == __name__
    assert pickle.loads(pickle.dumps(p)) == p and type(pickle.loads(pickle.dumps(p))) is Point
    assert p._replace(y=3) == Point(1, 3) and Point._make([4, 5, "r"]).label == "r"
    with pytest.raises(TypeError) as ours:
        Point()
    with pytest.raises(TypeError) as theirs:
        Plain()
    assert str(ours.value).replace(".__new__", "") == str(theirs.value).replace(".__new__", "")


def test_every_number_of_fields_has_a_working_constructor():
    """The precompiled constructors (1 to 40 fields) and the one compiled for more: arguments by position and
    by name land in their fields, defaults fill the rest."""
    for n in (1, 2, 7, 32, 33, 39, 40, 41, 48):
        names = [f"f{i}" for i in range(n)]
        body = {"__annotations__": dict.fromkeys(names, "int"), names[-1]: -1, "__qualname__": f"R{n}"}
        cls = type(Record)(f"R{n}", (Record,), body)
        assert cls(*range(n)) == tuple(range(n))
        assert cls(**{name: i for i, name in enumerate(names[:-1])}) == (*range(n - 1), -1)
        assert cls.__new__.__code__.co_varnames == ("_cls", *names)


@pytest.mark.parametrize("make", [lambda c: c(1), lambda c: c(1, 2), lambda c: c(x=3, label="q"),
                                  lambda c: c._make([4, 5, "r"]), lambda c: c(1)._replace(y=9)])
def test_the_same_values_repr_and_dict_as_namedtuple(make):
    ours, theirs = _both(make)
    assert tuple(ours) == tuple(theirs) and repr(ours) == repr(theirs) and ours._asdict() == theirs._asdict()
    assert ours == theirs and hash(ours) == hash(theirs)


def test_the_same_class_attributes_and_errors():
    assert Point._fields == Plain._fields and Point._field_defaults == Plain._field_defaults
    assert Point.__match_args__ == Plain.__match_args__ and Point.__slots__ == ()
    assert Point.__new__.__defaults__ == Plain.__new__.__defaults__
    for bad in (lambda c: c(), lambda c: c(1, 2, 3, 4), lambda c: c(z=1), lambda c: c._make([1]),
                lambda c: c(1)._replace(z=2)):
        errors = []
        for cls in (Point, Plain):
            with pytest.raises((TypeError, ValueError)) as exc:
                bad(cls)
            errors.append((type(exc.value), str(exc.value).replace(".__new__", "")))
        assert errors[0] == errors[1]


def test_members_pickling_and_copies():
    p = Point(1, -2)
    assert p.norm1() == 3 and Point.__doc__ == "A point." and Point.__qualname__ == "Point"
    assert pickle.loads(pickle.dumps(p)) == p and type(pickle.loads(pickle.dumps(p))) is Point
    assert copy.copy(p) == p and copy.deepcopy(p) == p and isinstance(p, tuple)
    mesh = Mesh("m", ("dp",), (8,))  # a module-level record of the package: pickled by its name
    assert type(pickle.loads(pickle.dumps(mesh))) is Mesh and pickle.loads(pickle.dumps(mesh)) == mesh


def test_a_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError):
        class BadR(Record):
            a: int = 1
            b: int


def test_meshlint_s_own_records_have_a_precompiled_constructor():
    """A record with more fields than the table compiles its ``__new__`` when its module is imported (~0.4 M
    instructions of every run that imports it): each ``class X(Record)`` in meshlint stays within the table."""
    import ast

    import meshlint.record as record

    package = Path(record.__file__).parent
    counts = {}
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "Record" for b in node.bases):
                counts[f"{path.name}:{node.name}"] = sum(isinstance(n, ast.AnnAssign) for n in node.body)
    assert len(counts) > 20 and max(counts.values()) >= 30
    assert {name: n for name, n in counts.items() if n > len(record._TEMPLATES)} == {}
