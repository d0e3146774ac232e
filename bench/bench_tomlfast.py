#!/usr/bin/env python3
"""The fast TOML reader against tomllib on every TOML text at hand: same table, or declined.

    python bench/bench_tomlfast.py [--no-history]

Corpus: every .toml file of this repository, ../shared/frameworks and the running Python's
prefix (site-packages: pyproject.toml and package data), then every distinct .toml blob in the
git history of torchtitan and KempnerForge (the mirrors under /work/.mirror, or
$MESHLINT_MIRRORS). Each text: tomllib's verdict, the fast reader's (meshlint/tomlfast.py) with
its line caches empty and again filled, and for a text tomllib accepts, the line-at-a-time key
positions (meshlint/inputs/tomlpos.quick_scan) against the full scan. Prints how many texts each
path handles, why the others were declined, and the CPU time of each reader over the texts both
read. Any WRONG line is a bug (the suite runs the same check on the files in this checkout:
tests/test_tomlfast.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tomlsame import verdict  # noqa: E402

from meshlint import tomlfast  # noqa: E402
from meshlint.inputs.tomlpos import quick_scan, scan  # noqa: E402

MIRRORS = Path(os.environ.get("MESHLINT_MIRRORS", "/work/.mirror"))
HISTORIES = {"torchtitan history": MIRRORS / "pytorch+torchtitan" / "repo",
             "KempnerForge history": MIRRORS / "KempnerInstitute+KempnerForge" / "repo"}


def files(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".frameworks", "__pycache__")]
        for name in filenames:
            if name.endswith(".toml"):
                try:
                    yield (Path(dirpath) / name).read_bytes().decode()
                except (OSError, UnicodeDecodeError):
                    continue


def blobs(repo: Path):
    """Every distinct .toml blob reachable from any ref (blobs a partial clone lacks are skipped)."""
    listing = subprocess.run(["git", "-C", str(repo), "rev-list", "--all", "--objects", "--missing=allow-any"],
                             capture_output=True, text=True).stdout
    shas = sorted({line.split(" ", 1)[0] for line in listing.splitlines() if line.endswith(".toml")})
    batch = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input=("\n".join(shas) + "\n").encode(),
                           capture_output=True).stdout
    pos = 0
    while pos < len(batch):
        end = batch.index(b"\n", pos)
        header = batch[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        data, pos = batch[pos:pos + size], pos + size + 1
        try:
            yield data.decode()
        except UnicodeDecodeError:
            continue


def why_declined(text: str) -> str:
    t = text.replace("\r\n", "\n")
    if '"""' in t or "'''" in t:
        return "multi-line strings"
    if "\r" in t or any(c in t for c in tomlfast._CONTROL):
        return "control characters"
    try:
        tomllib.loads(text)
    except ValueError:
        return "invalid TOML"
    return "other shapes (dates, hex, \\u escapes, dotted keys in inline tables)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-history", action="store_true", help="only the files on disk")
    args = parser.parse_args()
    sources = {"this repository": files(ROOT), "shared/frameworks": files(ROOT.parent / "shared" / "frameworks"),
               "site-packages (sys.prefix)": files(Path(sys.prefix))}
    if not args.no_history:
        sources.update({name: blobs(repo) for name, repo in HISTORIES.items() if repo.is_dir()})
    wrong = 0
    total: Counter = Counter()
    reasons: Counter = Counter()
    timed: list = []
    print("| corpus | texts | valid (tomllib) | fast path | declined | wrong | positions line at a time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, texts in sources.items():
        row: Counter = Counter()
        for text in texts:
            row["texts"] += 1
            tomlfast._KEYS.clear(), tomlfast._VALUES.clear(), tomlfast._HEADERS.clear()
            first, second = verdict(text), verdict(text)
            valid = why_declined(text) != "invalid TOML"
            row["valid"] += valid
            if first.startswith("WRONG") or second != first:
                wrong += 1
                row["wrong"] += 1
                print(f"WRONG ({name}): {first} / {second}: {text[:200]!r}")
            elif first == "accepted":
                row["accepted"] += 1
                timed.append(text)
            else:
                row["declined"] += 1
                reasons[why_declined(text)] += 1
            if valid:
                quick = quick_scan(text)
                if quick is not None:
                    full = scan(text)
                    if (list(quick.keys.items()), list(quick.tables.items()), quick.comments) != \
                            (list(full.keys.items()), list(full.tables.items()), full.comments):
                        wrong += 1
                        row["wrong"] += 1
                        print(f"WRONG positions ({name}): {text[:200]!r}")
                    row["quick"] += 1
        total.update(row)
        print(f"| {name} | {row['texts']:,} | {row['valid']:,} | {row['accepted']:,} | {row['declined']:,} | "
              f"{row['wrong']} | {row['quick']:,} |")
    print(f"| **all** | {total['texts']:,} | {total['valid']:,} | {total['accepted']:,} | {total['declined']:,} | "
          f"{total['wrong']} | {total['quick']:,} |")
    print("\ndeclined, why: " + ", ".join(f"{r} {n:,}" for r, n in reasons.most_common()))
    # CPU time over the texts both read (the fast reader's line caches filled as a run fills them)
    tomlfast._KEYS.clear(), tomlfast._VALUES.clear(), tomlfast._HEADERS.clear()
    t0 = time.process_time()
    for text in timed:
        tomlfast.loads(text)
    t1 = time.process_time()
    for text in timed:
        tomllib.loads(text)
    t2 = time.process_time()
    print(f"\n{len(timed):,} texts both read: fast reader {1e3 * (t1 - t0):.0f} ms, tomllib {1e3 * (t2 - t1):.0f} ms "
          f"({(t2 - t1) / max(t1 - t0, 1e-9):.1f}x)")
    print(f"{wrong} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
