"""Megatron-Core's RankGenerator (megatron/core/parallel_state.py:447-522) as arithmetic, for any rank.

A generator lays ranks out mixed-radix over its order, FIRST name fastest: with order
``tp-cp-ep-dp-pp`` and sizes (t, c, e, d, p), ``rank = tp + cp*t + ep*t*c + dp*t*c*e + pp*t*c*e*d``.
``get_ranks("tp-pp")`` (generate_masked_orthogonal_rank_groups, :251-345) lists every group whose
members differ only in the named coordinates: members ascending, groups by their lowest member. So a
rank's group is its own coordinates with the named ones run through their ranges: O(group size) for the
members, O(names) for its index and count, nothing that walks the world. A group whose named dims are
adjacent once size-1 dims are dropped is one strided 1-D family (meshlint.mesh.devmesh.Axis), so it gets the
closed-form placement on nodes of any other mesh axis.
"""

from __future__ import annotations

from math import prod
from typing import NamedTuple

from meshlint.mesh.devmesh import Axis, Mesh

DEFAULT_ORDER = "tp-cp-ep-dp-pp"      # megatron/training/initialize.py:378
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"     # the same line, with --use-tp-pp-dp-mapping
NAMES = ("tp", "pp", "dp", "ep", "cp")  # RankGenerator.name_to_size, in its order (:466-472)

# The groups initialize_model_parallel builds (parallel_state.py:548-1400): (generator, token, name
# meshlint shows, the global parallel_state keeps it in).
DENSE_GROUPS = (
    ("dense", "tp", "tp", "_TENSOR_MODEL_PARALLEL_GROUP"),
    ("dense", "cp", "cp", "_CONTEXT_PARALLEL_GROUP"),
    ("dense", "dp", "dp", "_DATA_PARALLEL_GROUP"),
    ("dense", "dp-cp", "dp_cp", "_DATA_PARALLEL_GROUP_WITH_CP"),
    ("dense", "pp", "pp", "_PIPELINE_MODEL_PARALLEL_GROUP"),
    ("dense", "tp-pp", "mp", "_MODEL_PARALLEL_GROUP"),
    ("dense", "tp-dp-cp", "tp_dp_cp", "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP"),
    ("dense", "tp-dp", "tp_dp", "_TENSOR_AND_DATA_PARALLEL_GROUP"),
    ("dense", "tp-cp", "tp_cp", "_TENSOR_AND_CONTEXT_PARALLEL_GROUP"),
)
EXPERT_GROUPS = (
    ("expert", "ep", "ep", "_EXPERT_MODEL_PARALLEL_GROUP"),
    ("expert", "tp", "etp", "_EXPERT_TENSOR_PARALLEL_GROUP"),
    ("expert", "tp-ep", "tp_ep", "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP"),
    ("expert", "tp-ep-pp", "tp_ep_pp", "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP"),
    ("expert", "dp", "edp", "_EXPERT_DATA_PARALLEL_GROUP"),
)
GROUPS = DENSE_GROUPS + EXPERT_GROUPS
# what the expert generator's own names mean (its tp is the expert tensor parallel size, its dp the expert dp)
EXPERT_LABELS = {"tp": "etp", "dp": "edp"}


class OrderError(ValueError):
    """RankGenerator's RuntimeError: a size above 1 whose name the order leaves out (:476-481)."""


class Grid(NamedTuple):
    """One RankGenerator: its names fastest first and their sizes."""

    name: str        # dense | expert
    order: tuple     # e.g. ("tp", "cp", "ep", "dp", "pp"), completed as RankGenerator completes it
    sizes: tuple

    @property
    def world(self) -> int:
        return prod(self.sizes)

    @property
    def strides(self) -> tuple:
        out, acc = [], 1
        for size in self.sizes:
            out.append(acc)
            acc *= size
        return tuple(out)

    def size_of(self, token: str) -> int:
        return prod(self.sizes[self.order.index(t)] for t in token.split("-"))

    def count(self, token: str) -> int:
        """How many groups ``get_ranks(token)`` returns."""
        return self.world // self.size_of(token)

    def coords(self, rank: int) -> dict:
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} is outside the {self.world}-rank {self.name} grid")
        return {n: (rank // st) % s for n, st, s in zip(self.order, self.strides, self.sizes)}

    def group(self, rank: int, token: str, limit: int | None = None) -> list:
        """The members of ``rank``'s group in ``get_ranks(token)``, ascending (the first ``limit``)."""
        masked = [self.order.index(t) for t in token.split("-")]
        masked.sort()
        base = rank
        for i in masked:
            base -= ((rank // self.strides[i]) % self.sizes[i]) * self.strides[i]
        size = prod(self.sizes[i] for i in masked)
        count = size if limit is None else min(size, limit)
        out = []
        for k in range(count):
            r, rest = base, k
            for i in masked:  # mixed radix, first masked name fastest (generate_masked_orthogonal_rank_groups)
                rest, idx = divmod(rest, self.sizes[i])
                r += idx * self.strides[i]
            out.append(r)
        return out

    def index(self, rank: int, token: str) -> int:
        """The position of ``rank``'s group in ``get_ranks(token)`` (groups ordered by lowest member)."""
        masked = set(token.split("-"))
        out, mult = 0, 1
        for n, st, s in zip(self.order, self.strides, self.sizes):
            if n not in masked:
                out += ((rank // st) % s) * mult
                mult *= s
        return out

    def all_groups(self, token: str) -> list:
        """``get_ranks(token)`` in full: O(world), for tests and small worlds only."""
        seen, out = set(), []
        for rank in range(self.world):
            if rank in seen:
                continue
            members = self.group(rank, token)
            seen.update(members)
            out.append(members)
        return out

    def axis(self, token: str, label: str) -> Axis | None:
        """The strided 1-D family ``token``'s groups form, or None when its names are not adjacent
        once size-1 names are dropped (tp-pp with dp > 1: each group is several strided runs)."""
        masked = {self.order.index(t) for t in token.split("-")}
        live = [i for i in range(len(self.order)) if self.sizes[i] > 1]
        inside = [i for i in live if i in masked]
        size = self.size_of(token)
        if not inside:
            return Axis(label, 1, 1, self.name, self.world)
        positions = [live.index(i) for i in inside]
        if positions != list(range(positions[0], positions[0] + len(positions))):
            return None
        return Axis(label, size, self.strides[inside[0]], self.name, self.world)

    def mesh(self) -> Mesh:
        """The grid in meshlint's mesh convention (LAST dim fastest): the order reversed."""
        labels = EXPERT_LABELS if self.name == "expert" else {}
        return Mesh(self.name, tuple(labels.get(n, n) for n in reversed(self.order)), tuple(reversed(self.sizes)))


def make_grid(name: str, tp: int, ep: int, dp: int, pp: int, cp: int, order: str) -> Grid:
    """``RankGenerator(tp, ep, dp, pp, cp, order)``: the order completed with the size-1 names it leaves
    out (:476-485). Raises OrderError as the constructor raises RuntimeError."""
    sizes = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp}
    names = order.lower().split("-")
    for n in NAMES:
        if n not in names:
            if sizes[n] != 1:
                raise OrderError(f"The size of ({n}) is ({sizes[n]}), but you haven't specified the order ({order}).")
            names.append(n)
    return Grid(name, tuple(names), tuple(sizes[n] for n in names))


def grids(tp: int, pp: int, cp: int, ep: int, etp: int, world: int, order: str) -> tuple:
    """(dense, expert) generators as initialize_model_parallel builds them (:700-745); the caller has
    checked that world divides by tp*pp*cp and by etp*ep*pp."""
    dense = make_grid("dense", tp, 1, world // (tp * pp * cp), pp, cp, order)
    expert = make_grid("expert", etp, ep, world // (etp * ep * pp), pp, 1, order)
    return dense, expert


def embedding_ranks(pp_group: list) -> list:
    """default_embedding_ranks (:525-531): the first and last stage of a pipeline group."""
    return [pp_group[0]] if len(pp_group) == 1 else [pp_group[0], pp_group[-1]]
