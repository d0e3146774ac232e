"""Enumerate every raise/assert a config value can reach on a framework's way to its first optimizer step, and write docs/refusals.md from that list and the hand classification below.

    python -m meshlint.generate.refusals --list kempnerforge=../shared/frameworks/KempnerForge-5666d0d
    python -m meshlint.generate.refusals --write \\
        kempnerforge=../shared/frameworks/KempnerForge-5666d0d \\
        torchtitan-0.2.x=../shared/frameworks/torchtitan-v0.2-9810191bb-parent \\
        torchtitan-0.3.0=.frameworks/torchtitan-0.3.0 \\
        torchtitan-main=../shared/frameworks/torchtitan-b5bcd76c6

``--list`` prints the sites (file:line, function, kind, condition, message); ``--write``
regenerates docs/refusals.md; ``--check`` compares it. The site list comes from ``ast`` over
the files in ``VERSIONS[...]["files"]`` (the loader, validation, ParallelDims, parallelize
functions, model construction, schedule construction, trainer init, dataloader); each site
is classified by ``classify()``: a hand entry in ``HAND`` (keyed by a fingerprint that
survives line shifts: file, function, exception, message) or, failing that, a pattern in
``PATTERNS`` (each names why it holds), so the table says for every line which one decided.

The parts: ``refusal_sites`` (what to read per version, and the ast walk that lists the sites),
``refusal_table`` (the hand classification and the patterns), this module (what a site's condition
the schema can evaluate, the document, the command line).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from meshlint.generate.refusal_sites import enumerate_sites, VERSIONS
from meshlint.generate.refusal_table import classify, VERDICTS
# the inventory's parts, also read from here (generate/megatron_refusals.py, tests/test_schema_generated.py)
from meshlint.generate.refusal_sites import Site, _short, _Walker  # noqa: F401
from meshlint.generate.refusal_table import HAND, PATTERNS, Rule  # noqa: F401


DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "refusals.md"


SCHEMA_IDS = {"kempnerforge": ("kempnerforge", "5666d0d"), "torchtitan-0.2.x": ("torchtitan", "0.2.x"),
              "torchtitan-0.3.0": ("torchtitan", "0.3.0"), "torchtitan-main": ("torchtitan", "main@b5bcd76c6")}


def evaluable_checks(version: str) -> dict:
    """path:line -> class name for each config-class check the schema check can evaluate (from the schema JSON),
    plus "__config__": every check site of a config class."""
    from meshlint.frameworks import schema_data

    if version not in SCHEMA_IDS:  # no generated config schema (Accelerate): every site has a hand entry
        return {"__config__": set()}
    s = schema_data.load(*SCHEMA_IDS[version])
    out: dict = {"__config__": set()}
    for qn, cls in s.data["classes"].items():
        table = next((t for t, e in s.data["tables"].items() if qn in e["classes"]), None)
        for step in cls.get("checks", []):
            if step["kind"] == "assign":
                continue
            out["__config__"].add(step["source"])
            if table is None:
                continue
            condition, local = schema_data._seed(step, _members(cls, step))
            if _static_ok(step.get("when", []) + [condition], cls["keys"], set(local)):
                out[step["source"]] = cls["name"]
    return out


def _static_ok(conditions: list, fields: dict, bound: set) -> bool:
    """Whether schema_data's evaluator can decide these conditions for any values: only the class's fields
    (and keys of its nested tables), literals, seeded names, loop variables over literal lists, and the few
    builtins it knows."""
    from meshlint.frameworks import schema_data

    bound = set(bound)
    for text in conditions:
        if text.startswith("for "):
            try:
                loop = ast.parse(text + ": pass").body[0]
            except SyntaxError:
                return False
            if not isinstance(loop.iter, (ast.List, ast.Tuple)) or not _expr_ok(loop.iter, fields, bound, schema_data):
                return False
            bound |= {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            continue
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            return False
        if not _expr_ok(node, fields, bound, schema_data):
            return False
    return True


def _expr_ok(node, fields: dict, bound: set, schema_data) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in bound and sub.id != "self" and sub.id not in schema_data._BUILTINS:
            return False
        if isinstance(sub, ast.Attribute):
            base = sub.value
            if isinstance(base, ast.Name) and base.id == "self":
                if sub.attr not in fields:
                    return False
            elif not (isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self"
                      and "table" in fields.get(base.attr, {})):
                if not (isinstance(base, ast.Name) and base.id in bound):
                    return False
        if isinstance(sub, ast.Call):
            if not (isinstance(sub.func, ast.Name) and sub.func.id in schema_data._BUILTINS) and not (
                    isinstance(sub.func, ast.Attribute) and sub.func.attr == "keys"):
                return False
        if isinstance(sub, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.NamedExpr)):
            return False
    return True


def _members(cls: dict, step: dict):
    for key in cls["keys"].values():
        if key.get("enum_check", {}).get("source") == step["source"]:
            return key["enum_check"]["values"]
    return None


# ----------------------------------------------------------------------------- the document

_ORDER = ("rule", "partial", "schema", "open", "runtime", "internal")


def inventory(sources: dict) -> dict:
    """version -> [(site, verdict, why, basis)] for each version whose source is given."""
    out = {}
    for version, root in sources.items():
        evaluable = evaluable_checks(version)
        out[version] = [(site, *classify(site, version, evaluable)) for site in enumerate_sites(Path(root), version)]
    return out


def counts(rows: list) -> dict:
    c = {k: 0 for k in _ORDER}
    c["unreviewed"] = 0
    for _, verdict, _, _ in rows:
        c[verdict.split()[0]] += 1
    c["sites"] = len(rows)
    c["decidable"] = c["rule"] + c["partial"] + c["schema"] + c["open"]
    return c


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def render(inv: dict) -> str:
    """docs/refusals.md from the inventory (every version in VERSIONS must be present)."""
    lines = [
        "# Refusals: every raise and assert a config value can reach before the first optimizer step",
        "",
        "<!-- Generated by meshlint/generate/refusals.py: edit the classification there, then regenerate:",
        "     python -m meshlint.generate.refusals --write kempnerforge=../shared/frameworks/KempnerForge-5666d0d \\",
        "       torchtitan-0.2.x=../shared/frameworks/torchtitan-v0.2-9810191bb-parent \\",
        "       torchtitan-0.3.0=.frameworks/torchtitan-0.3.0 torchtitan-main=../shared/frameworks/torchtitan-b5bcd76c6 \\",
        "       accelerate-1.15.0=.frameworks/accelerate-1.15.0 -->",
        "",
        "For each framework version meshlint models, every `raise` and `assert` in the code a training job runs "
        "between loading its config and its first optimizer step (the loader, config validation, ParallelDims, the "
        "parallelize functions, model construction, schedule construction, trainer init, the dataloader), with its "
        "`file:line` at the pinned commit, its condition, and what covers it. The site list is enumerated with `ast` "
        "by `meshlint/generate/refusals.py`; `tests/test_schema_generated.py` checks that each list below is exactly "
        "what the source at that commit contains, so the table cannot go stale silently.",
        "",
        "Verdicts:",
        "",
    ]
    for key in _ORDER:
        lines.append(f"- **{key}**: {VERDICTS[key]}.")
    lines += [
        "",
        "*Decidable* = rule + partial + schema + open: what a static checker given the config, the world size and the "
        "model tables can decide. *basis* says what classified a site: `site` (a hand entry for that refusal), "
        "`function` / `file` (a hand entry for a whole function or file, e.g. a kernel's buffers), `schema` (the "
        "generated schema shows the schema check evaluates that `__post_init__` check), `pattern` (a generic pattern: "
        "missing packages, files, GPU capability, tensor shapes, invariants of the framework's own objects).",
        "",
        "Out of scope: raises inside torch, tyro and other libraries (e.g. torch's `Unknown schedule name`), "
        "experiments/ trainers, inference scripts, and code that only runs after the first step (checkpoint saves "
        "at intervals, metrics). Model-construction checks on values of a model flavor (heads, RoPE dims, router "
        "groups) are counted as not reachable: a config names a flavor from the framework's table; a registry "
        "function that edits the model's own config is beyond what meshlint reads.",
        "",
        "## Coverage",
        "",
        "| version | sites | not reachable | not decidable | decidable | by a rule | in part | by the schema check | not yet covered |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    totals = {k: 0 for k in ("sites", "internal", "runtime", "decidable", "rule", "partial", "schema", "open")}
    for version in VERSIONS:
        c = counts(inv[version])
        for k in totals:
            totals[k] += c[k]
        lines.append(f"| {VERSIONS[version]['title']} | {c['sites']} | {c['internal']} | {c['runtime']} | "
                     f"{c['decidable']} | {c['rule']} | {c['partial']} | {c['schema']} | {c['open']} |")
    t = totals
    lines.append(f"| **all** | {t['sites']} | {t['internal']} | {t['runtime']} | {t['decidable']} | {t['rule']} | "
                 f"{t['partial']} | {t['schema']} | {t['open']} |")
    covered = t["rule"] + t["schema"]
    lines += [
        "",
        f"Of the {t['decidable']} decidable refusals, {t['rule']} ({_pct(t['rule'], t['decidable'])}) are covered by "
        f"a rule, {t['partial']} in part, {t['schema']} more by the schema check (ML101, ML108, ML112; "
        f"{_pct(covered, t['decidable'])} in all), and {t['open']} ({_pct(t['open'], t['decidable'])}) are "
        "not covered yet.",
        "",
        "## Not yet covered, grouped",
        "",
        "| what the framework refuses | versions | sites |",
        "| --- | --- | --- |",
    ]
    groups: dict = {}
    for version in VERSIONS:
        for site, verdict, why, _ in inv[version]:
            if verdict in ("open",) or verdict.startswith("partial"):
                g = groups.setdefault(why, {"versions": [], "sites": []})
                if version not in g["versions"]:
                    g["versions"].append(version)
                g["sites"].append(f"{_short_version(version)} `{site.where}`")
    for why, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]["versions"]), kv[0])):
        lines.append(f"| {_cell(why)} | {', '.join(_short_version(v) for v in g['versions'])} | "
                     f"{'<br>'.join(g['sites'])} |")
    for version in VERSIONS:
        spec = VERSIONS[version]
        c = counts(inv[version])
        lines += [
            "",
            f"## {spec['title']}",
            "",
            f"Commit {spec['commit']}; files: {', '.join('`' + f + '`' for f in spec['files'])}"
            + (f" (not {', '.join('`' + f + '`' for f in spec['skip'])})" if spec["skip"] else "")
            + ("; of " + "; of ".join(f"`{f}` only the functions matching `{r}`" for f, r in spec["only"].items())
               + " (the path of a parallelism config from the config file to the Accelerator)"
               if spec.get("only") else "") + ".",
            f"{c['sites']} sites: {c['rule']} by a rule, {c['partial']} in part, {c['schema']} by the schema check, "
            f"{c['open']} not yet covered, {c['runtime']} not decidable, {c['internal']} not reachable.",
            "",
            f"<!-- sites: {version} -->",
            "Decidable:",
            "",
            "| site | function | refusal | condition | verdict | why | basis |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        rest: dict = {}
        for site, verdict, why, basis in inv[version]:
            if verdict.split()[0] in ("runtime", "internal"):
                rest.setdefault((verdict, why, basis), []).append(site)
                continue
            refusal = f"{site.kind} {site.exception}" if site.kind == "raise" else "assert"
            message = f": {site.message}" if site.message else ""
            lines.append(f"| `{site.where}` | {_cell(site.function)} | {_cell(refusal + message)[:140]} | "
                         f"{_cell(site.condition)[:150]} | {verdict} | {_cell(why)} | {basis} |")
        lines += ["", "Not decidable, or not reachable from a config value (each site with its condition):", "",
                  "| verdict | why | basis | sites |", "| --- | --- | --- | --- |"]
        for (verdict, why, basis), sites in sorted(rest.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            cells = "<br>".join(f"`{x.where}` {_cell(x.condition)[:70]}" for x in sites)
            lines.append(f"| {verdict} | {_cell(why)} | {basis} | {cells} |")
        lines.append(f"<!-- end sites: {version} -->")
    return "\n".join(lines) + "\n"


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f} %" if b else "n/a"


def _short_version(version: str) -> str:
    return {"kempnerforge": "KF", "torchtitan-0.2.x": "tt 0.2.x", "torchtitan-0.3.0": "tt 0.3.0",
            "torchtitan-main": "tt main", "accelerate-1.15.0": "acc 1.15.0"}[version]


def doc_sites(text: str, version: str) -> list:
    """Every ``file:line`` listed in a version's section of docs/refusals.md, sorted."""
    start, end = f"<!-- sites: {version} -->", f"<!-- end sites: {version} -->"
    if start not in text or end not in text:
        return []
    block = text.split(start, 1)[1].split(end, 1)[0]
    return sorted(re.findall(r"`([\w./-]+\.py:\d+)`", block), key=_where_key)


def _where_key(where: str):
    path, _, line = where.rpartition(":")
    return path, int(line)


# ----------------------------------------------------------------------------- command line

def _parse_sources(items: list[str]) -> dict:
    out = {}
    for item in items:
        version, sep, path = item.partition("=")
        if not sep or version not in VERSIONS:
            raise SystemExit(f"error: {item!r}: give VERSION=PATH with VERSION one of {', '.join(VERSIONS)}")
        out[version] = Path(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.refusals", description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", help="VERSION=PATH (versions: " + ", ".join(VERSIONS) + ")")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true", help="print the sites")
    mode.add_argument("--write", action="store_true", help="regenerate docs/refusals.md")
    mode.add_argument("--check", action="store_true", help="compare docs/refusals.md (exit 1 if stale)")
    args = parser.parse_args(argv)
    sources = _parse_sources(args.sources)
    if args.list:
        for version, root in sources.items():
            for s in enumerate_sites(root, version):
                print(f"{version}\t{s.where}\t{s.function}\t{s.kind} {s.exception}\t{s.condition}\t{s.message}")
        return 0
    missing = [v for v in VERSIONS if v not in sources]
    if missing:
        print(f"error: --write and --check need every version's source; missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    text = render(inventory(sources))
    if args.check:
        same = DOC.is_file() and DOC.read_text(encoding="utf-8") == text
        print(f"{DOC}: {'up to date' if same else 'stale: regenerate it'}")
        return 0 if same else 1
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
