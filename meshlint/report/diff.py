"""Resolved-mesh diffs: what an edit to a config does to the ranks.

Two resolved configs are compared the way a reviewer needs: world size; dims
added, removed, resized or reordered in each mesh; every 1-D mesh's size,
stride and placement before and after; the coordinates and groups of a few
sample ranks; and the changes that matter operationally (TP or EP leaving a
node, a sharding layout that makes old checkpoints need resharding, ranks
left outside the mesh, a config that no longer builds).
"""

from __future__ import annotations

import os
import subprocess

from meshlint.mesh import ranks as rank_info
from meshlint.engine.check import FileReport
from meshlint.errors import MeshlintError
from meshlint.report.explain import axis_rows
from meshlint.report.terminal import safe_lines

# Degrees that decide how parameters are split: a change means old checkpoints are sharded differently.
SHARDING = {"kempnerforge": ("tp", "pp", "ep", "dp_shard"), "torchtitan": ("tp", "pp", "ep", "etp", "fsdp", "efsdp"),
            "native": ("tp", "pp", "ep", "etp", "dp_shard")}
NODE_BOUND = ("tp", "etp", "ep", "cp")  # the roles whose groups should stay inside a node


class GitError(MeshlintError):
    """A git revision could not be read (exit 2)."""


def read_revision(path: str, rev: str) -> bytes | None:
    """The bytes of ``path`` at git revision ``rev``; None when the file did not exist there.

    The blob's size is asked first, so an old version past the file-size limit
    is refused (a GitError, exit 2) without being read into memory.
    """
    from meshlint.limits import MAX_FILE_BYTES

    directory = os.path.dirname(os.path.abspath(path)) or "."
    name = os.path.basename(path)
    proc = _git(["cat-file", "-s", f"{rev}:./{name}"], directory, path, rev)
    if proc.returncode == 0:
        size = int(proc.stdout.strip() or 0) if proc.stdout.strip().isdigit() else 0
        if size > MAX_FILE_BYTES:
            raise GitError(f"{path} at {rev} is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes")
        proc = _git(["show", f"{rev}:./{name}"], directory, path, rev)
    if proc.returncode == 0:
        return proc.stdout
    err = proc.stderr.decode("utf-8", "replace").strip()
    if "does not exist in" in err or "exists on disk, but not in" in err:
        return None
    if "not a git repository" in err:
        raise GitError(f"{path} is not inside a git repository")
    raise GitError(f"cannot read {path} at {rev}: {err.splitlines()[-1] if err else 'git failed'}")


def _git(args: list, directory: str, path: str, rev: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=directory, capture_output=True, timeout=30)
    except FileNotFoundError:
        raise GitError("git is not installed, so --rev / --diff-base cannot read old versions") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} {rev}:{path} timed out") from None


class MeshDiff:
    """The comparison of two analysed configs."""

    def __init__(self, old: FileReport, new: FileReport, sample: tuple = ()):
        self.old, self.new = old, new
        self.base: str | None = None  # the git revision compared against, for check --diff-base
        self.changes: list[dict] = []
        self.callouts: list[dict] = []
        self.axes: list[dict] = []
        self.ranks: list[dict] = []
        if old.status == "checked" and new.status == "checked":
            self._compare(sample)

    @property
    def same(self) -> bool:
        return not self.changes

    # ------------------------------------------------------------------ comparison

    def _compare(self, sample: tuple) -> None:
        o, n = self.old.resolution, self.new.resolution
        if o.world_used != n.world_used:
            self.changes.append({"kind": "world", "dim": None, "old": o.world_used, "new": n.world_used})
        for name in dict.fromkeys([*o.meshes, *n.meshes]):
            self._compare_mesh(name, o.meshes.get(name), n.meshes.get(name))
        self._compare_axes()
        world = n.world_used or o.world_used
        if world:
            for r in rank_info.sample_ranks(world, sample):
                self.ranks.append({"rank": r, "old": _rank_view(self.old, r), "new": _rank_view(self.new, r)})
        self._callouts()

    def _compare_mesh(self, name: str, om, nm) -> None:
        if om is None and nm is None:
            return
        if om is None or nm is None:
            kind = "added" if om is None else "removed"
            present = nm if om is None else om
            self.changes.append({"kind": kind, "mesh": name, "dim": None,
                                 "old": None if om is None else _mesh(om), "new": None if nm is None else _mesh(nm)})
            return
        old_dims, new_dims = dict(zip(om.dims, om.sizes)), dict(zip(nm.dims, nm.sizes))
        for dim in om.dims:
            if dim not in new_dims:
                self.changes.append({"kind": "removed", "mesh": name, "dim": dim, "old": old_dims[dim], "new": None})
        for dim in nm.dims:
            if dim not in old_dims:
                self.changes.append({"kind": "added", "mesh": name, "dim": dim, "old": None, "new": new_dims[dim]})
            elif old_dims[dim] != new_dims[dim]:
                self.changes.append({"kind": "resized", "mesh": name, "dim": dim, "old": old_dims[dim],
                                     "new": new_dims[dim]})
        common_old = [d for d in om.dims if d in new_dims]
        common_new = [d for d in nm.dims if d in old_dims]
        if common_old != common_new:
            self.changes.append({"kind": "reordered", "mesh": name, "dim": None, "old": list(om.dims),
                                 "new": list(nm.dims)})

    def _compare_axes(self) -> None:
        old_rows = {r["name"]: r for r in axis_rows(self.old)}
        new_rows = {r["name"]: r for r in axis_rows(self.new)}
        for name in dict.fromkeys([*new_rows, *old_rows]):  # the new order first, then dims that went away
            before, after = old_rows.get(name), new_rows.get(name)
            self.axes.append({"dim": name, "old": _axis(before), "new": _axis(after)})
            if before and after and before["size"] > 1 and after["size"] > 1 \
                    and before["intra_node"] is not None and after["intra_node"] is not None \
                    and (before["intra_node"], before["max_nodes"]) != (after["intra_node"], after["max_nodes"]):
                self.changes.append({"kind": "placement", "dim": name, "old": _placement(before),
                                     "new": _placement(after)})

    def _callouts(self) -> None:
        o, n = self.old.resolution, self.new.resolution
        if n.framework_error and not o.framework_error:
            self.callouts.append({"kind": "broken", "message": f"the new config no longer builds: {n.framework_error}"})
        elif o.framework_error and not n.framework_error:
            self.callouts.append({"kind": "fixed", "message": f"the old config did not build ({o.framework_error}); "
                                                              "the new one does"})
        old_rows = {r["name"]: r for r in axis_rows(self.old)}
        for row in axis_rows(self.new):
            role = _role(row["name"])
            if role not in NODE_BOUND or row["size"] <= 1 or row["intra_node"] is None:
                continue
            before = old_rows.get(row["name"])
            was_inside = before is None or before["size"] <= 1 or before["intra_node"] is not False
            if not row["intra_node"] and was_inside:
                self.callouts.append({"kind": "placement", "message": (
                    f"{row['name']} groups now cross node boundaries: a group like "
                    f"{{{', '.join(map(str, row['example_crossing_group'][:8]))}}} spans {row['max_nodes']} nodes, "
                    f"so its {'all-reduces' if role in ('tp', 'etp') else 'all-to-alls' if role == 'ep' else 'ring exchanges'} "
                    "run over the network")})
            elif row["intra_node"] and before is not None and before["size"] > 1 and before["intra_node"] is False:
                self.callouts.append({"kind": "placement", "message": f"{row['name']} groups now stay inside a node"})
        moved = [f"{d} {o.degrees.get(d)} → {n.degrees.get(d)}" for d in SHARDING.get(self.new.dialect, ())
                 if o.degrees.get(d) is not None and n.degrees.get(d) is not None and o.degrees[d] != n.degrees[d]]
        if moved and self.old.dialect == self.new.dialect:
            self.callouts.append({"kind": "resharding", "message": (
                f"sharding layout changed ({', '.join(moved)}): checkpoints saved under the old layout hold "
                "differently shaped shards and must be resharded when loaded (torch.distributed.checkpoint can "
                "reshard on load; a per-rank state_dict cannot)")})
        if n.outside and n.outside != o.outside:
            first, last = n.outside
            self.callouts.append({"kind": "outside", "message": (
                f"ranks {first}-{last} ({last - first + 1} of {n.world_used}) fall outside the mesh")})
        if o.world_used and n.world_used and o.world_used != n.world_used:
            self.callouts.append({"kind": "world", "message": (
                f"the job needs {n.world_used} ranks instead of {o.world_used}: change the launcher too")})

    # ------------------------------------------------------------------ output

    def body(self) -> dict:
        return {"same": self.same, "changes": self.changes, "callouts": self.callouts, "axes": self.axes,
                "ranks": self.ranks}

    def to_json(self) -> dict:
        from meshlint.report.json_report import file_json

        return {"version": 1, "old": file_json(self.old), "new": file_json(self.new), **self.body()}

    def render(self, old_label: str, new_label: str) -> str:
        out = [f"--- {old_label}  {_headline(self.old)}", f"+++ {new_label}  {_headline(self.new)}"]
        if self.old.status != "checked" or self.new.status != "checked":
            return safe_lines(out)
        if self.same:
            out.append("same mesh: world, dims, sizes and placement are unchanged")
            return safe_lines(out)
        out.append("")
        o, n = self.old.resolution, self.new.resolution
        out.append(f"  world      {_v(o.world_used)} → {_v(n.world_used)}"
                   + ("" if o.world_used != n.world_used else " (unchanged)"))
        for name in dict.fromkeys([*o.meshes, *n.meshes]):
            om, nm = o.meshes.get(name), n.meshes.get(name)
            if (om and tuple(om)) != (nm and tuple(nm)):
                out.append(f"  mesh {name:<6} {_mesh_text(om)} → {_mesh_text(nm)}")
        for c in self.changes:
            if c["kind"] in ("added", "removed", "resized") and c["dim"]:
                out.append(f"    {c['kind']:<9} {c['dim']}: {_v(c['old'])} → {_v(c['new'])}")
            elif c["kind"] == "reordered":
                out.append(f"    reordered {c['mesh']}: {', '.join(c['old'])} → {', '.join(c['new'])}")
        out.append("")
        out.append(f"  {'dim':<13}{'size':>12}{'stride':>14}{'groups':>14}  placement")
        for row in self.axes:
            a, b = row["old"], row["new"]
            if a == b and (a is None or a["size"] == 1):
                continue
            out.append(f"  {row['dim']:<13}{_pair(a, b, 'size'):>12}{_pair(a, b, 'stride'):>14}"
                       f"{_pair(a, b, 'groups'):>14}  {_place_text(a)} → {_place_text(b)}")
        if self.ranks:
            out.append("")
            for r in self.ranks:
                out.append(f"  rank {r['rank']}: {_coords_text(r['old'])} → {_coords_text(r['new'])}")
                names = dict.fromkeys([*((r['old'] or {}).get('groups') or {}), *((r['new'] or {}).get('groups') or {})])
                parts = []
                for name in names:
                    og = ((r["old"] or {}).get("groups") or {}).get(name)
                    ng = ((r["new"] or {}).get("groups") or {}).get(name)
                    if (og and og["size"] > 1) or (ng and ng["size"] > 1):
                        parts.append(f"{name} {_group_text(r['old'], og)} → {_group_text(r['new'], ng)}")
                for part in parts:
                    out.append(f"      {part}")
        if self.callouts:
            out.append("")
            for c in self.callouts:
                out.append(f"  ! {c['message']}")
        return safe_lines(out)


# ---------------------------------------------------------------------- helpers

def _rank_view(report: FileReport, rank: int) -> dict | None:
    res = report.resolution
    if not res.world_used or rank >= res.world_used:
        return None
    mesh = res.mesh or next((m for m in res.meshes.values() if m), None)
    return {"coords": rank_info.flat_coords(res, rank) if mesh else {},
            "groups": rank_info.groups(res, rank),
            "outside": bool(mesh) and rank >= mesh.size}


def _mesh(mesh) -> dict:
    return {"dims": list(mesh.dims), "sizes": list(mesh.sizes)}


def _axis(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {k: row[k] for k in ("mesh", "size", "stride", "groups", "intra_node", "max_nodes")}


def _placement(row: dict) -> dict:
    return {"intra_node": row["intra_node"], "max_nodes": row["max_nodes"], "crossing_groups": row["crossing_groups"]}


def _role(name: str) -> str | None:
    from meshlint.engine.facts import ROLE_OF

    return ROLE_OF.get(name)


def _headline(report: FileReport) -> str:
    if report.status == "error":
        e = report.error
        return f"(unreadable: {e.code} at line {e.line}, column {e.col}: {e.message})"
    if report.status == "skipped":
        return f"(skipped: {report.note})"
    res = report.resolution
    mesh = res.mesh
    what = _mesh_text(mesh) if mesh else (f"does not build: {res.framework_error}" if res.framework_error
                                          else "mesh not resolved")
    return f"({report.dialect}, {_v(res.world_used)} ranks, {what})"


def _mesh_text(mesh) -> str:
    if mesh is None:
        return "none"
    dims = ", ".join(f'"{d}"' for d in mesh.dims) + ("," if len(mesh.dims) == 1 else "")
    sizes = ", ".join(map(str, mesh.sizes)) + ("," if len(mesh.sizes) == 1 else "")
    return f"({dims}) ({sizes})"


def _pair(a: dict | None, b: dict | None, key: str) -> str:
    left, right = _v(a and a[key]), _v(b and b[key])
    return left if left == right else f"{left} → {right}"


def _place_text(row: dict | None) -> str:
    if row is None:
        return "-"
    if row["size"] == 1:
        return "-"
    if row["intra_node"] is None:
        return "?"
    return "inside a node" if row["intra_node"] else f"crosses ({row['max_nodes']} nodes)"


def _coords_text(view: dict | None) -> str:
    if view is None:
        return "not in the world"
    if view["outside"]:
        return "OUTSIDE the mesh"
    return "(" + ", ".join(f"{d}={i}" for d, i in view["coords"].items()) + ")"


def _group_text(view: dict | None, info: dict | None) -> str:
    if view is None:
        return "-"
    return rank_info.describe_group(info) if info and info["size"] > 1 else "-"


def _v(value) -> str:
    return "-" if value is None else str(value)
