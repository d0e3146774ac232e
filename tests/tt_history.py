"""torchtitan's registry-era history for tests and bench: sampled commits, their trees exported from the local
mirror, and meshlint run over each tree in-process (every registry file, plus a llama3 launch line).

Used by tests/test_tt_commits.py and bench/tt_commits.py. Nothing here imports torchtitan: a tree is only
read, as meshlint reads a user's checkout.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
import traceback

MIRROR = "/work/.mirror/pytorch+torchtitan/repo"
FIRST = "9810191bb"        # the first registry commit (2026-02-23)
# commits the sample always holds: where the modelled semantics changed
LANDMARKS = {
    "9810191bb": "first registry commit",
    "de329200b": "issue 19's reproduction",
    "c4b409af2^": "last commit with ETP",
    "c4b409af2": "ETP removed",
    "641b5f6b8^": "last commit without spmd_backend",
    "641b5f6b8": "spmd_backend added",
    "601cf4d23": "full_dtensor removed",
    "73aed7f6c^": "last commit with local_batch_size",
    "73aed7f6c": "token-budget keys (the key rename)",
    "253a12a2a^": "last commit without the ep check",
    "253a12a2a": "ep check added",
}


def available() -> bool:
    return os.path.isdir(MIRROR)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", MIRROR, *args], check=True, capture_output=True, text=True).stdout


def head() -> str:
    return _git("rev-parse", "--short=9", "HEAD").strip()


def history() -> list:
    """[(short sha, ISO date)] of every commit from the first registry commit to the mirror's HEAD, oldest first."""
    out = _git("log", "--reverse", "--format=%h %ad", "--date=short", "--abbrev=9", f"{FIRST}^..HEAD")
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]


def sample(n: int) -> list:
    """[(sha, date, why)]: the landmarks, HEAD, and commits spread evenly over the range until ``n`` are held."""
    rows = history()
    dates = dict(rows)
    picked: dict = {}
    for ref, why in LANDMARKS.items():
        sha = _git("rev-parse", "--short=9", ref).strip()
        picked[sha] = why
    picked.setdefault(head(), "the mirror's HEAD")
    spread = max(n - len(picked), 0)
    while len(picked) < min(n, len(rows)):  # evenly spaced over the range; more points where they hit a landmark
        for i in range(spread):
            picked.setdefault(rows[round(i * (len(rows) - 1) / max(spread - 1, 1))][0], "date spread")
            if len(picked) >= n:
                break
        spread += 1
    order = {sha: i for i, (sha, _) in enumerate(rows)}
    return sorted(((sha, dates.get(sha, "?"), why) for sha, why in picked.items()), key=lambda r: order.get(r[0], -1))


def export(sha: str, cache: str) -> str:
    """The commit's torchtitan/ package (and assets/version.txt) under ``cache/<sha>``, exported once."""
    root = os.path.join(cache, sha)
    done = os.path.join(root, ".exported")
    if os.path.exists(done):
        return root
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryFile() as tar:
        # the package only: the mirror lacks some test assets' blobs, and nothing else is read
        paths = ["torchtitan"] + (["assets/version.txt"] if _has(sha, "assets/version.txt") else [])
        subprocess.run(["git", "-C", MIRROR, "archive", "--format=tar", sha, *paths], check=True, stdout=tar,
                       stderr=subprocess.DEVNULL)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            _extract(t, root)
    open(done, "w").close()
    return root


def _extract(archive: tarfile.TarFile, root: str) -> None:
    """``extractall`` with the "data" filter where tarfile has one (3.10.12, 3.11.4 and later); on an older
    interpreter (Debian 12's 3.11.2) its refusals by hand: no absolute path, nothing outside ``root``, no link
    pointing outside it, no device or FIFO."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(root, filter="data")
        return
    top = os.path.realpath(root)

    def inside(path: str) -> bool:
        return os.path.commonpath([top, os.path.realpath(path)]) == top

    for member in archive.getmembers():
        path = os.path.join(top, member.name)
        target = os.path.join(os.path.dirname(path) if member.issym() else top, member.linkname)
        if os.path.isabs(member.name) or not inside(path) or not (member.isfile() or member.isdir() or (
                (member.issym() or member.islnk()) and not os.path.isabs(member.linkname) and inside(target))):
            raise tarfile.TarError(f"refused archive member {member.name!r}")
    archive.extractall(root)


def _has(sha: str, path: str) -> bool:
    return subprocess.run(["git", "-C", MIRROR, "cat-file", "-e", f"{sha}:{path}"], capture_output=True).returncode == 0


def registry_files(root: str) -> list:
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "torchtitan")):
        dirnames.sort()
        if "config_registry.py" in filenames:
            out.append(os.path.join(dirpath, "config_registry.py"))
    return out


LAUNCH = ["--module", "llama3", "--config", "llama3_debugmodel", "--parallelism.tensor_parallel_degree", "2"]


def check_tree(root: str) -> dict:
    """meshlint over one tree, in-process: every registry file, then the llama3 launch line at world 8.

    Returns {version, decided_by, unmodelled (names), configs, errors (error findings), ml008 (paths),
    crashes (tracebacks), launch (the launch's status and its ML codes), unstated (configs with no version)}."""
    from meshlint.engine.check import Options, check_all, run_checks
    from meshlint.engine import units
    from meshlint.inputs.launch import parse_launch_args
    from meshlint.engine.ruleset import load_rules
    from meshlint.mesh.topology import CliTopology

    options = Options(rules=load_rules(), topology=CliTopology(world_size=8), torchtitan_root=root)
    out = {"version": None, "decided_by": None, "unmodelled": [], "configs": 0, "errors": 0, "ml008": [],
           "crashes": [], "launch": None, "unstated": 0}

    def note(report) -> None:
        fw = getattr(getattr(report, "spec", None), "framework", None) or {}
        if report.status == "checked":
            out["configs"] += 1
            if not fw.get("version") or not fw.get("decided_by"):
                out["unstated"] += 1
            if out["version"] is None and fw.get("version"):
                out["version"], out["decided_by"] = fw["version"], fw["decided_by"]
                out["unmodelled"] = [u["name"] for u in fw.get("unmodelled", [])]
        out["errors"] += sum(f.severity == "error" for f in report.findings)
        codes = [f.code for f in report.findings] + ([report.error.code] if report.error is not None else [])
        if "ML008" in codes:
            out["ml008"].append(report.path)

    for path in registry_files(root):
        try:
            for report in check_all(path, options):
                note(report)
        except Exception:  # noqa: BLE001 - the very thing counted
            out["crashes"].append(f"{path}: {traceback.format_exc(limit=-3)}")
    try:
        report = run_checks(units.analyse_launch(parse_launch_args(list(LAUNCH)), options), options)
        note(report)
        codes = sorted({f.code for f in report.findings} | ({report.error.code} if report.error is not None else set()))
        out["launch"] = f"{report.status} {','.join(codes)}".strip()
    except Exception:  # noqa: BLE001
        out["crashes"].append(f"launch: {traceback.format_exc(limit=-3)}")
    return out
