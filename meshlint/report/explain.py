"""``meshlint explain``: the resolved mesh, in words and tables."""

from __future__ import annotations

from meshlint.mesh import ranks as rank_info
from meshlint.engine.check import FileReport, input_error_finding
from meshlint.frameworks.base import DEGREES
from meshlint.mesh.devmesh import Mesh, place
from meshlint.report.json_report import file_json
from meshlint.report.terminal import safe, safe_lines
from meshlint.report.workload import model_json, model_line, pipeline_json, pipeline_line

GRID_MAX = 512  # the node × local-rank grid is printed for worlds up to this many ranks


class RankView:
    """What ``explain --rank N`` / ``--coords`` asked about one config."""

    def __init__(self, report: FileReport, ranks: tuple = (), coords: dict | None = None):
        self.ranks: list[dict] = []
        self.reverse: dict | None = None
        if report.status != "checked" or not (ranks or coords):
            return
        res = report.resolution
        if not res.world_used or not res.meshes:
            if res.framework_error:
                why = f"the framework builds no mesh for it ({res.framework_error})"
            elif res.world_used == 1:
                why = "a one-process world builds no mesh"
            else:
                why = "the world size is unknown (pass --world-size N)"
            raise ValueError(f"{report.path}: ranks cannot be explained: {why}")
        for rank in ranks:
            if rank >= res.world_used:
                raise ValueError(f"{report.path}: rank {rank} is outside the world of {res.world_used} ranks")
            self.ranks.append(rank_json(report, rank))
        if coords:
            mesh_name, rank = rank_info.rank_of(res, coords)
            self.reverse = {"coords": coords, "mesh": mesh_name, "rank": rank,
                            "placement": rank_info.placement(rank, report.topology.gpus_per_node, res.world_used,
                                                             report.topology.placement)}


def rank_json(report: FileReport, rank: int) -> dict:
    """``{"rank", "coords": {dim: index}, "groups": {dim: [ranks]}, ...}`` for one rank."""
    res = report.resolution
    infos = rank_info.groups(res, rank)
    mesh = res.mesh or next((m for m in res.meshes.values() if m), None)
    return {
        "rank": rank,
        "coords": rank_info.flat_coords(res, rank),
        "meshes": rank_info.coords(res, rank),
        "groups": {name: (info or {}).get("members") for name, info in infos.items()},
        "group_info": {name: ({k: v for k, v in info.items() if k != "members"} if info else None)
                       for name, info in infos.items()},
        "outside": mesh is not None and rank >= mesh.size,
        "placement": rank_info.placement(rank, report.topology.gpus_per_node, res.world_used,
                                         report.topology.placement),
    }


def axis_rows(report: FileReport) -> list[dict]:
    """Every 1-D mesh the framework names, with its placement on nodes."""
    res, topo = report.resolution, report.topology
    rows = []
    for name, axis in res.axes.items():
        row = {"name": name, "mesh": axis.mesh, "size": axis.size, "stride": axis.stride, "groups": axis.groups,
               "intra_node": None, "max_nodes": None, "crossing_groups": None, "example_crossing_group": None}
        if topo.gpus_per_node and res.world_used:
            p = place(axis, topo.gpus_per_node, res.world_used, topo.placement)
            row.update(intra_node=p.intra_node, max_nodes=p.max_nodes, crossing_groups=p.crossing_groups,
                       example_crossing_group=list(p.example) if p.example else None)
        rows.append(row)
    return rows


def explain_json(report: FileReport, view: RankView | None = None) -> dict:
    out = file_json(report)
    if report.status == "checked":
        out["explain"] = {
            "axes": axis_rows(report),
            "submeshes": [{"call": call, "returns": what} for call, what in report.resolution.submeshes],
            "outside": ({"first": report.resolution.outside[0], "last": report.resolution.outside[1]}
                        if report.resolution.outside else None),
            "ranks": view.ranks if view else [],
            "reverse": view.reverse if view else None,
        }
    return out


def render(report: FileReport, view: RankView | None = None) -> str:
    if report.error:
        f = input_error_finding(report.error)
        return safe(f"{report.path}:{f.line}:{f.col}: {f.code} [error] {f.message}")
    if report.status == "skipped":
        return safe(f"{report.path}: skipped: {report.note}")
    res, topo, spec = report.resolution, report.topology, report.spec
    out = [report.path]

    def row(label: str, text: str) -> None:
        out.append(f"  {label:<10} {text}")

    row("dialect", report.dialect)
    fw = getattr(spec, "framework", None)
    if fw and fw.get("version"):
        how, _, evidence = (fw.get("decided_by") or "default").partition(": ")
        row("version", f"{fw['name']} {fw['version']} ({how})")
        if evidence:
            row("evidence", evidence)
    unreadable = getattr(spec, "unreadable", None)
    if unreadable:
        row("unknown", "; ".join(f"{u['key'] or 'the config'} (line {u['line']}: {u['reason']})"
                                 for u in unreadable[:4]) + (f"; {len(unreadable) - 4} more" if len(unreadable) > 4 else ""))
    if topo.world_size is not None:
        row("world", f"{topo.world_size} ranks ({topo.world_source})")
    elif res.world_implied:
        row("world", f"unknown; the explicit degrees imply {res.world_used} ranks (shown below)")
    else:
        row("world", "unknown (pass --world-size, add '# meshlint: world_size=N', or name the file *_<N>gpu.toml)")
    if topo.gpus_per_node:
        nodes = -(-res.world_used // topo.gpus_per_node) if res.world_used else None
        shape = (f"{nodes} node{'s' if nodes != 1 else ''} × {topo.gpus_per_node} GPUs" if nodes
                 else f"{topo.gpus_per_node} GPUs per node")
        row("nodes", f"{shape} ({topo.gpus_per_node_source}), {topo.placement} placement")
    else:
        row("nodes", "GPUs per node unknown: placement not computed (pass --gpus-per-node)")
    row("degrees", " ".join(f"{n}={_v(res.degrees.get(n))}" for n in DEGREES
                            if n in spec.degree_keys or (n != "etp" and n in res.degrees)))
    if res.valid_worlds:
        from meshlint.engine.facts import _valid_worlds_text

        row("valid", _valid_worlds_text(res.valid_worlds).replace("valid ", "", 1))
    if res.framework_error:
        row("framework", f"FAILS: {res.framework_error}")
    elif res.primary is None:
        row("framework", "builds no mesh" if res.world_used else "mesh not resolved (world size unknown)")
    else:
        mesh = res.meshes[res.primary]
        row("framework", f'builds {_call(report.dialect, mesh)}')
    model, plan = model_json(report), pipeline_json(report)
    if model is not None:
        row("model", model_line(model))
    if plan is not None:
        row("pipeline", pipeline_line(plan))
    if res.meshes:
        out.append("")
    for name, mesh in res.meshes.items():
        if mesh is None:
            out.append(f'  mesh "{name}": cannot be built')
        else:
            out.append(f'  mesh "{name}": {_tuple(mesh.dims)} {_tuple(mesh.sizes)}, {mesh.size} ranks')
    extra = {n: g for n, g in getattr(res, "global_meshes", {}).items() if n not in res.meshes}
    for name, (dims, sizes) in extra.items():  # registry era: the rest of ParallelDims._global_meshes
        size = 1
        for n in sizes:
            size *= n
        out.append(f'  mesh "{name}": {_tuple(dims)} {_tuple(sizes)}, {size} ranks'
                   + (" (one per pp stage)" if name.startswith("spmd_dense") and res.degrees.get("pp", 1) > 1 else ""))
    rows = axis_rows(report)
    if rows:
        out.append("")
        mw = max([13] + [len(str(r['mesh'])) + 2 for r in rows])
        out.append(f"  {'1-D mesh':<14}{'in mesh':<{mw}}{'size':>6}{'stride':>8}{'groups':>8}  placement")
        for r in rows:
            out.append(f"  {r['name']:<14}{r['mesh']:<{mw}}{r['size']:>6}{r['stride']:>8}{r['groups']:>8}  {_placement(r)}")
    if res.submeshes:
        out.append("")
        out.append("  sub-meshes the framework asks for")
        width = max(len(c) for c, _ in res.submeshes)
        for call, what in res.submeshes:
            out.append(f"    {call:<{width}}  -> {what}")
    if res.outside:
        out.append("")
        out.append(f"  ranks {res.outside[0]}-{res.outside[1]} are OUTSIDE the mesh")
    if res.notes:
        out.append("")
        out.append("  declared -> resolved")
        for note in res.notes:
            out.append(f"    {note}")
    out += _grid(report)
    for info in (view.ranks if view else []):
        out += _rank_lines(info)
    if view and view.reverse:
        rev = view.reverse
        where = _where(rev["placement"])
        coords = ", ".join(f"{d}={i}" for d, i in rev["coords"].items())
        out += ["", f"  ({coords}) in mesh {rev['mesh']!r} is rank {rev['rank']}{where}"]
    return safe_lines(out)  # names, paths and notes come from the file: each line escaped whole


def _where(placement: dict | None) -> str:
    return f" (node {placement['node']}, local rank {placement['local_rank']})" if placement else ""


def _rank_lines(info: dict) -> list[str]:
    coords = ", ".join(f"{d}={i}" for d, i in info["coords"].items())
    lines = ["", f"  rank {info['rank']}{_where(info['placement'])}: "
                 + ("OUTSIDE the mesh" if info["outside"] else f"({coords})")]
    width = max((len(n) for n in info["group_info"]), default=4)
    for name, gi in info["group_info"].items():
        if gi is None or gi["size"] == 1:
            continue
        members = info["groups"][name]
        text = rank_info.describe_group({**gi, "members": members} if members is not None else gi)
        lines.append(f"    {name:<{width}}  {text}  (index {gi['index']} of {gi['size']})")
    return lines


def _grid(report: FileReport) -> list[str]:
    """Node × local-rank grid of coordinates, for worlds small enough to read."""
    res, topo = report.resolution, report.topology
    mesh = res.mesh
    world, gpn = res.world_used, topo.gpus_per_node
    if mesh is None or not gpn or not world or world > GRID_MAX or gpn > GRID_MAX:
        return []
    nodes = -(-world // gpn)
    cells = {}
    for rank in range(world):
        p = rank_info.placement(rank, gpn, world, topo.placement)
        cells[(p["node"], p["local_rank"])] = ",".join(map(str, mesh.coords(rank))) if rank < mesh.size else "--"
    width = max(len(c) for c in cells.values())
    header = " " * 10 + " ".join(f"{i:>{width}}" for i in range(gpn))
    lines = ["", f"  grid: node × local rank -> ({', '.join(mesh.dims)}) in mesh {mesh.name!r}", "  " + header]
    for node in range(nodes):
        row = " ".join(f"{cells.get((node, i), ''):>{width}}" for i in range(gpn))
        lines.append(f"  {'node ' + str(node):<10}{row}")
    return lines


def _placement(r: dict) -> str:
    if r["intra_node"] is None:
        return "unknown (GPUs per node unknown)" if r["size"] > 1 else "-"
    if r["size"] == 1:
        return "-"
    if r["intra_node"]:
        return "inside one node"
    return (f"CROSSES nodes: groups span up to {r['max_nodes']} nodes "
            f"({r['crossing_groups']} of {r['groups']} groups cross)")


def _call(dialect: str, mesh: Mesh) -> str:
    if dialect == "megatron":
        order = "-".join(reversed(mesh.dims))
        return f"RankGenerator(order={order!r}) over {mesh.size} ranks (tp fastest), and the expert grid below"
    if dialect == "torchtitan" and mesh.name == "world":  # v0.1.0: init_device_mesh of the degrees > 1
        return (f'init_device_mesh("cuda", {_tuple(mesh.sizes)}, mesh_dim_names={_tuple(mesh.dims)}), then '
                "dp, dp_shard_cp and dp_cp flattened from it")
    if dialect == "torchtitan":
        return (f"world mesh [{mesh.size}] unflattened into dataloading, dense and sparse meshes "
                f"(dense {_tuple(mesh.dims)} {_tuple(mesh.sizes)})")
    return f'init_device_mesh("cuda", {_tuple(mesh.sizes)}, mesh_dim_names={_tuple(mesh.dims)})'


def _tuple(items) -> str:
    parts = [f'"{x}"' if isinstance(x, str) else str(x) for x in items]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _v(v) -> str:
    return "?" if v is None else str(v)
