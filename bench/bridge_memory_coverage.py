#!/usr/bin/env python3
"""How many of Megatron-Bridge's shipped recipes meshlint reads, resolves and sizes, and why the rest are not sized.

    python bench/bridge_memory_coverage.py [--mirror PATH] [REF ...]     # Markdown on stdout

Each REF (default: v0.3.1 and 067f987df) is exported from the Bridge mirror (``git archive``) and every recipe file
under src/megatron/bridge/recipes and perf_recipes is checked twice with ``meshlint check --format json``: once to
read each recipe's degrees, then at its own world (the name's ``_NNgpu_``, else the smallest world its degrees
allow, as tests/test_megatron_bridge_memory.py does). Counted: recipe functions read (status checked), resolved
at a world, sized (``memory`` present), ML504/ML505 at that world, and each reason the JSON notes give for a recipe
not sized ("memory: not estimated ..."), grouped. Hugging Face configs are looked up in $HF_HUB_CACHE (default:
the tests' fixtures/megatron_bridge/hf, which holds two Qwen3.5 configs): never downloaded. A script, not a test.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = "/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo"
REFS = ("v0.3.1", "067f987df03b8355b03192d88d70f1709fedf51a")
# a reason's recipe-specific words folded, so that reasons group: (pattern, replacement)
_FOLD = ((re.compile(r"\(at [^()]*\)"), ""), (re.compile(r"[\w.-]+/[\w.-]+'s"), "<model>'s"),
         (re.compile(r"is not in the local Hugging Face cache \([^)]*\)"), "is not in the local Hugging Face cache"),
         (re.compile(r"\s+"), " "))
# the reason groups, first match wins: (label, pattern on the folded reason)
GROUPS = (("model from a Hugging Face config.json not in the local cache", r"not in the local Hugging Face cache"),
          ("PEFT (LoRA/DoRA adapters on a frozen base)", r"PEFT"),
          ("Mamba hybrid layers", r"Mamba hybrid"),
          ("multi-latent attention (MLA)", r"multi-latent attention"),
          ("provider class not in the v0.3.1 table", r"is not in the provider table"),
          ("Hugging Face config.json lacks an architecture field", r"config\.json does not say it"),
          ("the model id comes from the environment", r"reads the environment"),
          ("model built by a call not followed", r"call of [\w().]+, not followed"),
          ("set under a condition not known statically", r"condition that is not known statically"))


def recipe_files(src: str) -> list:
    out = []
    for sub in ("recipes", "perf_recipes"):
        for folder, dirs, files in os.walk(os.path.join(src, sub)):
            dirs.sort()
            out += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return out


def check(paths: list, *extra) -> list:
    """``meshlint check --format json`` of ROOT's meshlint on ``paths``: its files."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.setdefault("HF_HUB_CACHE", os.path.join(ROOT, "fixtures", "megatron_bridge", "hf"))
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", *paths, "--format", "json", *extra],
                          capture_output=True, text=True, env=env, cwd=ROOT)   # -m puts the cwd first
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout)["files"]


def own_world(f: dict) -> int | None:
    """The recipe's intended world: the name's ``_NNgpu_``, else the smallest its degrees allow (dp 1)."""
    named = re.search(r"_(\d+)gpu_", f["path"].rsplit("::", 1)[-1])
    if named:
        return int(named.group(1))
    d = f["declared"] or {}
    tp, pp, cp, ep, etp = (d.get(k) for k in ("tp", "pp", "cp", "ep", "etp"))
    if all(isinstance(v, int) and v > 0 for v in (tp, pp, cp, ep)):
        return math.lcm(tp * pp * cp, (etp or tp) * ep * pp)
    return None


def group(reason: str) -> str:
    for pattern, repl in _FOLD:
        reason = pattern.sub(repl, reason)
    return next((label for label, pattern in GROUPS if re.search(pattern, reason)), reason.strip()[:120])


def measure(src: str) -> dict:
    files = recipe_files(src)
    first = [f for f in check(files) if f["status"] == "checked"]
    worlds: dict = {}
    for f in first:
        world = own_world(f)
        worlds.setdefault(world, []).append(f["path"])
    at_world = [f for world, paths in worlds.items() if world for f in check(paths, "--world-size", str(world))]
    reasons: collections.Counter = collections.Counter()
    for f in at_world:
        if f["memory"] is None:
            note = next((n for n in f["notes"] if n.startswith("memory: not estimated")), None)
            reasons[group(note[note.index("(") + 1:-1]) if note else "no reason noted"] += 1
    return {"read": len(first), "no_world": len(worlds.get(None, [])),
            "resolved": sum(1 for f in at_world if f["framework"] and f["framework"]["builds"]),
            "sized": sum(1 for f in at_world if f["memory"] is not None),
            "ml504": sorted(f["path"].split("/megatron/bridge/", 1)[1] for f in at_world
                            if any(x["rule"] in ("ML504", "ML505") for x in f["findings"])),
            "reasons": reasons}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("refs", nargs="*", default=list(REFS))
    parser.add_argument("--mirror", default=MIRROR, help="a Megatron-Bridge git repository (default: %(default)s)")
    args = parser.parse_args()
    for ref in args.refs:
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(["git", "-C", args.mirror, "archive", ref, "src"], capture_output=True)
            if archive.returncode:
                print(f"{ref}: not in {args.mirror}", file=sys.stderr)
                return 2
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            m = measure(os.path.join(tmp, "src", "megatron", "bridge"))
        print(f"\n### Megatron-Bridge {ref[:9]}\n")
        print(f"{m['read']} recipe functions read; {m['read'] - m['no_world']} with a world (named or from their "
              f"degrees), {m['resolved']} resolved there, **{m['sized']} sized**; ML504/ML505 at their own world: "
              f"{', '.join(m['ml504']) or 'none'}\n")
        print("| not sized because | recipes |\n| --- | --- |")
        for reason, n in m["reasons"].most_common():
            print(f"| {reason.replace('|', '/')} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
