"""``render_svg``: the ranks of a mesh drawn on the nodes, as one SVG picture.

Rows are nodes, cells are GPUs (columns = local rank). A cell's fill is its TP
group; thick outlines bound the PP stages; a badge gives the EP rank (badge
colour = EP group); ``dp`` text gives the data-parallel coordinate; ranks the
mesh does not cover are hatched. Big worlds are aggregated (the first nodes,
the first node of each PP stage, the last node), so the cost and the output
stay bounded whatever the world size: nothing here walks the world.

Standard library only, and nothing heavy at import time: ``meshlint explain
--svg`` runs on the static path.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from meshlint.mesh.devmesh import Axis, node_of

SVG_NS = "http://www.w3.org/2000/svg"

# Above these the picture is a summary, not one cell per GPU.
MAX_RANKS = 1024
MAX_NODES = 128
HEAD_NODES = 4          # nodes drawn first in a summary
MAX_STAGE_NODES = 16    # a summary also draws the first node of each PP stage, up to this many stages
LINE_CELLS = 16         # a wider node wraps onto more lines
MAX_LOCALS = 64         # a wider node shows its first and last GPUs only
HEAD_LOCALS, TAIL_LOCALS = 32, 8

# Geometry (user units; the viewBox lets the picture scale).
MARGIN = 20
CELL_W, CELL_H = 72, 44
LABEL_W = 96            # "node 8,191"
PP_W = 84               # the stage column at the right of a panel
PANEL_GAP = 36
HEADER_ROW = 20         # the local-rank indices above the cells
LEGEND_ROW = 26
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"

# ColorBrewer Set3 without its grey (grey means "outside the mesh"): light
# colours, so the dark cell text keeps a contrast ratio above 4.5 on all.
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
           "#b3de69", "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f")
# Dark colours for the EP badges, which carry white text.
BADGE_PALETTE = ("#1f4e79", "#8b1a1a", "#1b6b3a", "#6a3d9a", "#7a4a00", "#005f6b", "#8c2d6b", "#4d4d4d")
TEXT = "#1a1a1a"
BADGE_TEXT = "#ffffff"
MUTED = "#555555"
OUTLINE = "#1a1a1a"
HATCH_ID = "meshlint-outside"

# Characters XML 1.0 forbids (a file name may hold control characters, or lone surrogates from
# undecodable bytes); the class lists the forbidden ones since that compiles ten times faster.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class Marks(NamedTuple):
    """Which axis each mark of the picture shows (None: not drawn)."""

    colour: Axis | None     # fill colour = group along this axis (tp, else the innermost axis)
    pp: Axis | None
    ep: Axis | None
    shard: Axis | None      # dp_shard / fsdp (or batch when nothing finer exists)
    replicate: Axis | None  # dp_replicate


class Line(NamedTuple):
    """One drawn line: GPU cells of one node, or a gap standing for what is not drawn."""

    node: int | None        # None for a gap line
    label: str              # left column text
    cells: tuple = ()       # (rank, local) left to right
    gap: str = ""


class Cell(NamedTuple):
    rank: int
    node: int
    local: int
    x: float
    y: float
    key: tuple              # (panel, line, column): neighbours for the PP outlines


def render_svg(title: str, axes: dict, world_size: int, gpus_per_node: int, placement: str = "block",
               covered: int | None = None) -> str:
    """The picture of ``axes`` laid out on ``world_size`` ranks, ``gpus_per_node`` per node.

    ``covered``: ranks the mesh covers; ranks from there on are drawn as outside it.
    """
    if world_size < 1 or not gpus_per_node or gpus_per_node < 1:
        raise ValueError("render_svg needs world_size >= 1 and gpus_per_node >= 1")
    world, g = world_size, gpus_per_node
    covered = world if covered is None else max(0, min(covered, world))
    ctx = _Context(world, g, -(-world // g), placement, covered, pick_marks(axes))
    lines = layout_lines(world, g, ctx.nodes, placement, ctx.marks.pp)
    aggregated = any(line.node is None for line in lines)
    ncols = max((len(line.cells) for line in lines), default=1)
    panel_w = _panel_width(ncols, ctx.marks.pp is not None)
    panels = split_panels(lines, panel_w)
    header = _header_lines(title, axes, ctx, lines, aggregated)
    legend = _legend_entries(ctx, lines, aggregated)

    header_h = MARGIN + sum(h for _, h, _ in header) + 10
    legend_y = header_h + HEADER_ROW + max(len(p) for p in panels) * CELL_H + 24
    width = max(2 * MARGIN + len(panels) * panel_w + (len(panels) - 1) * PANEL_GAP,
                *(2 * MARGIN + _text_w(text, size) for text, _, size in header),
                *(2 * MARGIN + 64 + _text_w(text, 13) for _, text in legend))
    height = legend_y + len(legend) * LEGEND_ROW + MARGIN

    out = [f'<svg xmlns="{SVG_NS}" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
           f'height="{height:.0f}" font-family="{FONT}" data-world="{world}" data-nodes="{ctx.nodes}" '
           f'data-aggregated="{str(aggregated).lower()}">',
           f"<title>{_text(title)}</title>", _defs(),
           f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>']
    out += _draw_header(header)
    cells: list[Cell] = []
    for i, panel in enumerate(panels):
        out += _draw_panel(panel, i, MARGIN + i * (panel_w + PANEL_GAP), header_h, ncols, ctx, cells)
    if ctx.marks.pp:
        out.append(_pp_outlines(cells, ctx))
    out += _draw_legend(legend, legend_y)
    out.append("</svg>")
    return "\n".join(out) + "\n"


class _Context(NamedTuple):
    world: int
    g: int
    nodes: int
    placement: str
    covered: int
    marks: Marks

    def stage(self, rank: int) -> int | None:
        """PP stage, or -1 outside the mesh (so the outlines also bound the outside ranks)."""
        if rank >= self.covered:
            return -1
        return _local(self.marks.pp, rank)


# ----------------------------------------------------------------------------- what to draw

def pick_marks(axes: dict) -> Marks:
    """Axes of size 1 mark nothing; colour by tp, else by the innermost axis (smallest stride)."""
    real = {name: a for name, a in axes.items() if a.size > 1}
    colour = real.get("tp") or min(real.values(), key=lambda a: (a.stride, a.size, a.name), default=None)
    shard = next((real[n] for n in ("dp_shard", "fsdp") if n in real), None)
    replicate = real.get("dp_replicate")
    if shard is None and replicate is None:
        shard = real.get("batch")  # torchtitan: the data-loading rank
    return Marks(colour, real.get("pp"), real.get("ep"), shard, replicate)


def group_id(axis: Axis, rank: int) -> int:
    """Index of the group of ``rank`` along ``axis`` (groups numbered by their first member)."""
    return (rank // (axis.size * axis.stride)) * axis.stride + rank % axis.stride


def _local(axis: Axis | None, rank: int) -> int | None:
    return axis.local_rank(rank) if axis is not None and rank < axis.span else None


def layout_lines(world: int, g: int, nodes: int, placement: str, pp: Axis | None) -> list[Line]:
    """The lines to draw, top to bottom, with gap lines where nodes or GPUs are left out."""
    out: list[Line] = []
    prev = None
    for node in shown_nodes(world, g, nodes, placement, pp):
        if prev is not None and node > prev + 1:
            skipped = node - prev - 1
            what = f"node {prev + 1:,}" if skipped == 1 else f"nodes {prev + 1:,}–{node - 1:,}"
            out.append(Line(None, "", gap=f"⋯ {what} not drawn ({skipped:,} node{'s' if skipped > 1 else ''}) ⋯"))
        out += _node_lines(node, world, g, nodes, placement)
        prev = node
    return out


def shown_nodes(world: int, g: int, nodes: int, placement: str, pp: Axis | None) -> list[int]:
    """Every node, or for a big world the first few, the first of each PP stage, and the last."""
    if world <= MAX_RANKS and nodes <= MAX_NODES:
        return list(range(nodes))
    keep = set(range(min(HEAD_NODES, nodes)))
    if pp is not None and pp.size <= MAX_STAGE_NODES:
        keep |= {node_of(k * pp.stride, g, nodes, placement) for k in range(pp.size) if k * pp.stride < world}
    keep.add(nodes - 1)
    return sorted(keep)


def _node_lines(node: int, world: int, g: int, nodes: int, placement: str) -> list[Line]:
    """A node's GPUs in lines of LINE_CELLS; a very wide node shows only its first and last GPUs."""
    if g <= MAX_LOCALS:
        segments = [range(g)]
    else:
        segments = [range(HEAD_LOCALS), range(g - TAIL_LOCALS, g)]
    out: list[Line] = []
    for i, segment in enumerate(segments):
        if i:
            hidden = f"{HEAD_LOCALS}–{g - TAIL_LOCALS - 1}"
            out.append(Line(None, "", gap=f"⋯ GPUs {hidden} of node {node:,} not drawn ⋯"))
        for start in range(segment.start, segment.stop, LINE_CELLS):
            locs = range(start, min(start + LINE_CELLS, segment.stop))
            cells = tuple((r, loc) for loc in locs if (r := _rank_at(node, loc, g, nodes, placement)) < world)
            if cells:
                label = f"node {node:,}" if start == 0 else f"GPUs {start}–{locs[-1]}"
                out.append(Line(node, label, cells))
    return out


def _rank_at(node: int, local: int, g: int, nodes: int, placement: str) -> int:
    """Inverse of ``node_of``: block puts G consecutive ranks on a node, cyclic deals them round."""
    return local * nodes + node if placement == "cyclic" else node * g + local


def _panel_width(ncols: int, pp: bool) -> int:
    return LABEL_W + ncols * CELL_W + (PP_W if pp else 0)


def split_panels(lines: list[Line], panel_w: int) -> list[list[Line]]:
    """Side-by-side columns of nodes so that a long list of nodes gives a picture near 3:2.

    A summary stays one column: it reads top to bottom, first nodes to last.
    """
    if len(lines) <= 16 or any(line.node is None for line in lines):
        return [lines]
    best, best_err = [lines], None
    for k in range(1, 7):
        panels = _chunk_by_node(lines, -(-len(lines) // k))
        w = len(panels) * panel_w + (len(panels) - 1) * PANEL_GAP
        h = 200 + max(len(p) for p in panels) * CELL_H  # 200: about the header and legend
        err = abs(w / h - 1.4)
        if best_err is None or err < best_err:
            best, best_err = panels, err
    return best


def _chunk_by_node(lines: list[Line], target: int) -> list[list[Line]]:
    """Consecutive runs of about ``target`` lines, never splitting a node's lines."""
    panels: list[list[Line]] = [[]]
    for line in lines:
        starts_node = line.label.startswith("node")
        if len(panels[-1]) >= target and starts_node:
            panels.append([])
        panels[-1].append(line)
    return panels


# ----------------------------------------------------------------------------- drawing

def _text(s: str) -> str:
    from xml.sax.saxutils import escape  # on use, not at import: it pulls in urllib.request (~35 ms)

    return escape(_NOT_XML.sub("", str(s)))


def _text_w(s: str, size: float) -> float:
    """Rough text width: enough to size the canvas so that nothing is cut off."""
    return len(s) * size * 0.6


def _defs() -> str:
    return (f'<defs><pattern id="{HATCH_ID}" patternUnits="userSpaceOnUse" width="7" height="7" '
            f'patternTransform="rotate(45)"><rect width="7" height="7" fill="#eeeeee"/>'
            f'<line x1="0" y1="0" x2="0" y2="7" stroke="#9a9a9a" stroke-width="3"/></pattern></defs>')


def _header_lines(title: str, axes: dict, ctx: _Context, lines: list[Line], aggregated: bool) -> list:
    """(text, height, font size) of the title block."""
    shape = (f"{ctx.world:,} GPUs · {ctx.nodes:,} node{'s' if ctx.nodes > 1 else ''} × {ctx.g} GPUs · "
             f"{ctx.placement} placement")
    if ctx.covered < ctx.world:
        shape += f" · the mesh covers {ctx.covered:,} of {ctx.world:,} ranks"
    real = [f"{name} {a.size}" for name, a in axes.items() if a.size > 1]
    out = [(title, 28, 20), (shape, 20, 13), ("axes: " + (" · ".join(real) or "none of size > 1"), 20, 13)]
    if aggregated:
        drawn = [line for line in lines if line.node is not None]
        gpus = sum(len(line.cells) for line in drawn)
        out.append((f"Aggregated: too many GPUs to draw one by one; {gpus:,} of {ctx.world:,} GPUs drawn "
                    f"({len({line.node for line in drawn}):,} of {ctx.nodes:,} nodes), ⋯ rows stand for the rest",
                    20, 13))
    return out


def _draw_header(header: list) -> list[str]:
    out, y = [], MARGIN
    for i, (text, h, size) in enumerate(header):
        y += h
        note = text.startswith("Aggregated")  # in dark red, so that a summary is not read as the whole world
        weight = ' font-weight="bold"' if i == 0 or note else ""
        fill = "#8b1a1a" if note else TEXT
        cls = ' class="aggregated-note"' if note else ""
        out.append(f'<text x="{MARGIN}" y="{y}" font-size="{size}" fill="{fill}"{weight}{cls}>{_text(text)}</text>')
    return out


def _draw_panel(panel: list[Line], index: int, x0: float, y0: float, ncols: int, ctx: _Context,
                cells: list) -> list[str]:
    """One column of nodes: local-rank header, then a line per node (or gap)."""
    cx = x0 + LABEL_W
    out = [f'<text x="{cx - 8}" y="{y0 + 14}" font-size="11" fill="{MUTED}" text-anchor="end">local rank</text>']
    for col in range(ncols):
        out.append(f'<text x="{cx + col * CELL_W + CELL_W / 2}" y="{y0 + 14}" font-size="11" fill="{MUTED}" '
                   f'text-anchor="middle">{col}</text>')
    if ctx.marks.pp:
        out.append(f'<text x="{cx + ncols * CELL_W + 10}" y="{y0 + 14}" font-size="11" fill="{MUTED}">PP stage</text>')
    mixed = _stages_mixed(panel, ctx)
    for row, line in enumerate(panel):
        y = y0 + HEADER_ROW + row * CELL_H
        if line.node is None:
            out.append(f'<text class="gap" x="{cx + ncols * CELL_W / 2}" y="{y + CELL_H / 2 + 5}" font-size="13" '
                       f'font-style="italic" fill="{MUTED}" text-anchor="middle">{_text(line.gap)}</text>')
            continue
        size = 13 if line.label.startswith("node") else 11
        out.append(f'<text class="node-label" x="{cx - 8}" y="{y + CELL_H / 2 + 5}" font-size="{size}" '
                   f'fill="{TEXT if size == 13 else MUTED}" text-anchor="end">{_text(line.label)}</text>')
        for col, (rank, local) in enumerate(line.cells):
            cell = Cell(rank, line.node, local, cx + col * CELL_W, y, (index, row, col))
            cells.append(cell)
            out += _draw_cell(cell, ctx, mixed)
        if ctx.marks.pp:
            out.append(_stage_label(line, cx + ncols * CELL_W + 10, y, ctx))
    return out


def _stages_mixed(panel: list[Line], ctx: _Context) -> bool:
    """Whether some line holds several PP stages: then each cell names its stage."""
    if not ctx.marks.pp:
        return False
    return any(len({s for r, _ in line.cells if (s := ctx.stage(r)) != -1}) > 1 for line in panel)


def _stage_label(line: Line, x: float, y: float, ctx: _Context) -> str:
    stages = sorted({s for r, _ in line.cells if (s := ctx.stage(r)) != -1})
    if not stages:
        text = ""
    elif len(stages) <= 3:
        text = "PP " + ", ".join(map(str, stages))
    else:
        text = f"PP {stages[0]}–{stages[-1]}"
    return (f'<text class="pp-label" x="{x}" y="{y + CELL_H / 2 + 5}" font-size="13" font-weight="bold" '
            f'fill="{TEXT}">{text}</text>')


def _draw_cell(cell: Cell, ctx: _Context, mixed: bool) -> list[str]:
    """The GPU rectangle (class ``gpu``, data-* attributes, a tooltip) and its marks."""
    rank = cell.rank
    x, y, w, h = cell.x + 2, cell.y + 2, CELL_W - 4, CELL_H - 4
    where = {"rank": rank, "node": cell.node, "local": cell.local}
    inside = rank < ctx.covered
    marks = _cell_marks(ctx.marks, rank) if inside else {}
    fill = PALETTE[marks["group"] % len(PALETTE)] if inside else f"url(#{HATCH_ID})"
    data = " ".join(f'data-{k}="{v}"' for k, v in {**where, **marks}.items())
    named = {(f"{ctx.marks.colour.name} group" if k == "group" and ctx.marks.colour else k): v
             for k, v in {**where, **marks}.items()}
    tip = " · ".join(f"{k} {v}" for k, v in named.items()) + ("" if inside else " · outside the mesh")
    out = [f'<rect class="{"gpu" if inside else "gpu outside"}" {data} x="{x}" y="{y}" width="{w}" height="{h}" '
           f'rx="3" fill="{fill}"><title>{_text(tip)}</title></rect>',
           f'<text x="{x + 5}" y="{y + 14}" font-size="12" font-weight="bold" fill="{TEXT}">{rank}</text>']
    if "ep" in marks:
        colour = BADGE_PALETTE[group_id(ctx.marks.ep, rank) % len(BADGE_PALETTE)]
        out.append(f'<g class="ep-badge"><rect x="{x + w - 26}" y="{y + 3}" width="23" height="15" rx="7" '
                   f'fill="{colour}"/><text x="{x + w - 14.5}" y="{y + 14}" font-size="10" font-weight="bold" '
                   f'fill="{BADGE_TEXT}" text-anchor="middle">e{marks["ep"]}</text></g>')
    dp = _dp_text(marks)
    if dp:
        out.append(f'<text class="dp" x="{x + 5}" y="{y + h - 6}" font-size="11" fill="{TEXT}">{dp}</text>')
    if mixed and "pp" in marks:
        out.append(f'<text x="{x + w - 4}" y="{y + h - 6}" font-size="11" fill="{TEXT}" '
                   f'text-anchor="end">p{marks["pp"]}</text>')
    return out


def _cell_marks(m: Marks, rank: int) -> dict:
    """What a rank inside the mesh shows: colour group, PP stage, EP rank, DP coordinate."""
    out = {"group": group_id(m.colour, rank) if m.colour is not None and rank < m.colour.span else 0}
    for name, axis in (("pp", m.pp), ("ep", m.ep), ("dp", m.shard), ("dp-replicate", m.replicate)):
        if (value := _local(axis, rank)) is not None:
            out[name] = value
    return out


def _dp_text(marks: dict) -> str:
    shard, rep = marks.get("dp"), marks.get("dp-replicate")
    if rep is not None and shard is not None:
        return f"dp {rep}·{shard}"
    if rep is not None or shard is not None:
        return f"dp {rep if shard is None else shard}"
    return ""


def _pp_outlines(cells: list[Cell], ctx: _Context) -> str:
    """Thick lines wherever a cell's neighbour is in another PP stage (or missing): one path."""
    stage = {c.key: ctx.stage(c.rank) for c in cells}
    segments = set()
    for c in cells:
        p, row, col = c.key
        x0, y0, x1, y1 = c.x, c.y, c.x + CELL_W, c.y + CELL_H
        for (dr, dc), seg in (((0, -1), (x0, y0, x0, y1)), ((0, 1), (x1, y0, x1, y1)),
                              ((-1, 0), (x0, y0, x1, y0)), ((1, 0), (x0, y1, x1, y1))):
            if stage.get((p, row + dr, col + dc), "none") != stage[c.key]:
                segments.add(seg)
    d = " ".join(f"M{a:g} {b:g}L{e:g} {f:g}" for a, b, e, f in sorted(segments))
    return (f'<path class="pp-boundary" d="{d}" stroke="{OUTLINE}" stroke-width="3" fill="none" '
            f'stroke-linecap="square"/>')


# ----------------------------------------------------------------------------- legend

def _legend_entries(ctx: _Context, lines: list[Line], aggregated: bool) -> list:
    """(sample kind, text) for every mark that the picture uses; a "dp ..." kind is its own sample."""
    m = ctx.marks
    out = [("rank", "number = global rank; columns = local rank on the node; rows = nodes")]
    if m.colour is None:
        out.append(("swatch", "fill: one colour (no axis of size > 1 to colour by)"))
    elif m.colour.name == "tp":
        out.append(("swatch", f"fill colour = TP group (tp = {m.colour.size}): the GPUs of one group share a colour; "
                              f"{len(PALETTE)} colours repeat"))
    else:
        what = ("one group of all its GPUs, so one colour" if m.colour.groups == 1
                else f"{len(PALETTE)} colours repeat")
        out.append(("swatch", f"fill colour = {m.colour.name} group ({m.colour.name} = {m.colour.size}; no tp > 1, "
                              f"so the innermost axis colours the GPUs): {what}"))
    if m.pp:
        text = f"thick outline = PP stage boundary (pp = {m.pp.size}); right column: the stage(s) of each line"
        if any(_stages_mixed([line], ctx) for line in lines):
            text += "; p k in a cell = stage k"
        out.append(("outline", text))
    if m.ep:
        out.append(("badge", f"badge e k = rank k in its EP group (ep = {m.ep.size}); badge colour = EP group"))
    if m.shard and m.replicate:
        out.append(("dp 1·3", f"dp r·s = data-parallel coordinate: replica r of {m.replicate.size} (dp_replicate), "
                          f"shard s of {m.shard.size} ({m.shard.name})"))
    elif m.shard or m.replicate:
        axis = m.shard or m.replicate
        out.append(("dp 3", f"dp k = data-parallel coordinate: rank k of {axis.size} along {axis.name}"))
    if ctx.covered < ctx.world:
        first, last = ctx.covered, ctx.world - 1
        ranks = f"rank {first}" if first == last else f"ranks {first:,}–{last:,}"
        out.append(("hatch", f"hatched grey = {ranks} outside the mesh (it covers {ctx.covered:,} of "
                             f"{ctx.world:,} ranks): in no group"))
    if aggregated:
        shown = "the first nodes" + (", the first node of each PP stage" if m.pp else "") + " and the last node"
        out.append(("gap", f"⋯ row = nodes or GPUs not drawn (aggregated: drawn are {shown})"))
    return out


def _draw_legend(entries: list, y0: float) -> list[str]:
    out = [f'<g class="legend"><text x="{MARGIN}" y="{y0}" font-size="13" font-weight="bold" '
           f'fill="{TEXT}">Legend</text>']
    for i, (kind, text) in enumerate(entries):
        y = y0 + (i + 1) * LEGEND_ROW - 6
        out.append(_legend_sample(kind, MARGIN, y))
        out.append(f'<text x="{MARGIN + 64}" y="{y + 4}" font-size="13" fill="{TEXT}">{_text(text)}</text>')
    out.append("</g>")
    return out


def _legend_sample(kind: str, x: float, y: float) -> str:
    """A small drawing of the mark, 56 units wide, centred on y."""
    top = y - 9
    if kind == "swatch":
        return "".join(f'<rect x="{x + i * 14}" y="{top}" width="12" height="18" rx="2" fill="{PALETTE[i]}"/>'
                       for i in range(4))
    if kind == "outline":
        return (f'<rect x="{x + 1}" y="{top}" width="52" height="18" fill="{PALETTE[0]}" stroke="{OUTLINE}" '
                f'stroke-width="3"/>')
    if kind == "badge":
        return (f'<rect x="{x}" y="{top + 1}" width="23" height="15" rx="7" fill="{BADGE_PALETTE[0]}"/>'
                f'<text x="{x + 11.5}" y="{top + 12}" font-size="10" font-weight="bold" fill="{BADGE_TEXT}" '
                f'text-anchor="middle">e1</text>')
    if kind.startswith("dp"):
        return f'<text x="{x}" y="{y + 4}" font-size="11" fill="{TEXT}">{_text(kind)}</text>'
    if kind == "hatch":
        return f'<rect x="{x}" y="{top}" width="54" height="18" rx="3" fill="url(#{HATCH_ID})"/>'
    if kind == "gap":
        return f'<text x="{x}" y="{y + 4}" font-size="13" font-style="italic" fill="{MUTED}">⋯</text>'
    # "rank": a cell's number
    return f'<text x="{x}" y="{y + 4}" font-size="12" font-weight="bold" fill="{TEXT}">12</text>'
