"""What the model-table generators (generate/models.py, generate/v02.py) record per flavor: values with their origins."""

from __future__ import annotations

from meshlint.generate import pyeval as P
from meshlint.generate.pyeval import EMPTY, V


class Facts:
    """The facts of one flavor: value, origins (``(path, line)``), plus notes and what is missing."""

    def __init__(self):
        self.values: dict = {}
        self.origins: dict = {}
        self.notes: list = []
        self.missing: list = []
        self.cites: dict = {}  # fact -> extra citation text (a rule from the code, not a literal)

    def put(self, name: str, val: V | None, note_if_unknown: str = "", cite: str = "") -> None:
        if val is None:
            self.lack(name, note_if_unknown or "not in the config")
            return
        v = val.v
        if isinstance(v, P.Unknown):
            self.lack(name, note_if_unknown or v.describe())
            return
        if v is None:
            self.lack(name, note_if_unknown or "None in the flavor (set at run time)")
            return
        if isinstance(v, (P.Obj, P.Lst, P.Dct)):
            self.lack(name, note_if_unknown or "not a number")
            return
        self.values[name] = v
        self.origins[name] = val.o
        if cite:
            self.cites[name] = cite

    def lack(self, name: str, why: str) -> None:
        if name not in self.missing:
            self.missing.append(name)
            self.notes.append(f"{name}: {why}")


def union_all(vals: list) -> frozenset:
    out = EMPTY
    for v in vals:
        out = out | v.o
    return out


def _ranges(ids: list) -> str:
    out, start, prev = [], None, None
    for i in ids + [None]:
        if start is None:
            start = prev = i
        elif i is not None and i == prev + 1:
            prev = i
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = i
    return ",".join(out)


def put_qk_norm(facts: Facts, norms: list, also: tuple | list = ()) -> None:
    """``qk_norm = true`` when every attention layer has a q_norm and a k_norm module (``norms``: the layers' q_norm
    and k_norm values; ``also``: values whose origins cite them too): a norm over each head's q and k, which keeps
    its own input for the backward (docs/cost-model.md, "Memory"). Absent from the table means none (MLA's q_norm
    normalises the latent instead)."""
    if norms and all(isinstance(n.v, (P.Obj, P.Leaf)) for n in norms):
        facts.put("qk_norm", V(True, union_all(norms) | union_all(also)))
