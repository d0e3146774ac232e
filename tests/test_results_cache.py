"""The results cache (meshlint/cli/results_cache.py): same output as without it, no stale hit, no trust in its files.

In process and deterministic: no timings. The degree search behind help lines has a time budget,
and a result that ran out of it is never cached; the budget is lifted here so every run of a
fixture gives the same result whatever the machine's load.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import pickle
import subprocess
import sys

import pytest
from conftest import FIXTURES

import meshlint.engine.check as check_module
from meshlint import installed
from meshlint.cli import results_cache, results_store
from meshlint.cli.lint import run

FORMATS = ("text", "json", "sarif", "github")
KF = """[model]
dim = 4096
n_layers = 32
n_heads = 32

[distributed]
dp_shard = -1
tp = 2
"""


def _run(paths, fmt="text", **kwargs) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run([str(p) for p in paths], kwargs.pop("settings", None), fmt=fmt, color="never", **kwargs)
    return code, out.getvalue()


def _settings(**kwargs):
    from meshlint.cli.settings import CliSettings

    return CliSettings(**kwargs)


def _results(cache_dir) -> str:
    return os.path.join(cache_dir, results_cache.SUBDIR)


def _entries(cache_dir) -> list:
    """The keys the index names (the entries a run can find)."""
    return sorted(k.hex() for k in results_store.read_index(_results(cache_dir)))


def _pack_of(cache_dir, key: str):
    """(the pack file holding ``key``'s entry, its offset, its length)."""
    pack, offset, length, _ = results_store.read_index(_results(cache_dir))[bytes.fromhex(key)]
    return os.path.join(_results(cache_dir), pack.hex() + ".pack"), offset, length


def _entry_bytes(cache_dir, key: str) -> bytes:
    path, offset, length = _pack_of(cache_dir, key)
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def _plant(cache_dir, key: str, data: bytes) -> str:
    """Make ``data`` what the index names as ``key``'s entry: its pack holds only it (the index record follows)."""
    records = results_store.read_index(_results(cache_dir))
    digest = bytes.fromhex(key)
    pack, _, _, gen = records[digest]
    path = os.path.join(_results(cache_dir), pack.hex() + ".pack")
    with open(path, "wb") as f:
        f.write(data)
    records[digest] = (pack, 0, len(data), gen)
    results_store.write_index(_results(cache_dir), records, gen)
    return path


def _fresh_cache(path) -> None:
    """A new cache directory holding the session's rule cache (parsing the rules again costs ~0.3 s a test)."""
    import shutil

    path.mkdir(mode=0o700)
    session = os.environ.get("MESHLINT_CACHE_DIR")
    if session and os.path.isdir(session):
        for name in os.listdir(session):
            if name.startswith("rules-") and name.endswith(".json"):
                shutil.copy2(os.path.join(session, name), path / name)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    _fresh_cache(path)
    monkeypatch.setenv("MESHLINT_CACHE_DIR", str(path))
    monkeypatch.delenv("MESHLINT_NO_CACHE", raising=False)
    return path


@pytest.fixture
def spy(monkeypatch):
    """The paths check_all was called on (a cache hit never calls it)."""
    seen = []
    real = check_module.check_all

    def wrapper(path, *args, **kwargs):
        seen.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(check_module, "check_all", wrapper)
    return seen


# ------------------------------------------------------------------------ same output, every fixture, every format

@pytest.fixture(scope="module")
def fixture_runs(tmp_path_factory):
    """Every fixture, each format: without the cache, then from a warm cache (and which files were checked)."""
    files = check_module.collect_paths([str(FIXTURES)])
    memo: dict = {}
    real = check_module.check_all
    checked: list = []

    def memoized(path, options, raw=None, name=None):  # one analysis per file: the formats only render
        checked.append(path)
        if path not in memo:
            memo[path] = real(path, options, raw, name)
        return memo[path]

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MESHLINT_CACHE_DIR", str(tmp_path_factory.mktemp("results-cache")))
        mp.delenv("MESHLINT_NO_CACHE", raising=False)
        mp.setattr(check_module, "check_all", memoized)
        uncached = {fmt: _run(files, fmt, cache=False) for fmt in FORMATS}
        cold = _run(files, "json")  # every TOML config misses, and is stored with its JSON entry
        checked.clear()
        warm = {}
        for fmt in FORMATS:
            warm[fmt] = _run(files, fmt)
        warm_checked = list(checked)
    return files, uncached, cold, warm, warm_checked


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_warm_cache_gives_the_same_output_byte_for_byte(fixture_runs, fmt):
    files, uncached, cold, warm, _ = fixture_runs
    assert len(files) > 150
    assert warm[fmt] == uncached[fmt]  # (exit code, output)


def test_a_cold_run_gives_the_same_output_and_a_warm_run_checks_no_toml_config(fixture_runs):
    files, uncached, cold, warm, warm_checked = fixture_runs
    assert cold == uncached["json"]
    assert [p for p in warm_checked if p.endswith(".toml")] == []
    assert all(p.endswith(".py") for p in warm_checked)  # registries always take the normal path


# ------------------------------------------------------------------------ no stale hit

def test_editing_the_file_changes_the_result(cache_dir, write, spy):
    path = write(KF, "cfg_8gpu.toml")
    first = _run([path])
    assert _run([path]) == first and spy == [str(path)]
    path.write_text(KF.replace("tp = 2", "tp = 3"))
    second = _run([path])
    assert second != first and "ML10" in second[1]
    assert second == _run([path], cache=False)


def test_options_are_part_of_the_key(cache_dir, write):
    path = write(KF, "cfg.toml")
    plain = _run([path])
    for settings in (_settings(world_size=16), _settings(world_size=16, gpus_per_node=1), _settings(ignore=("ML105",)),
                     _settings(select=("ML1",)), _settings(gpu_memory_gib=1.0), _settings(fail_on="info"),
                     _settings(dialect="native")):
        got = _run([path], settings=settings)
        assert got == _run([path], settings=settings, cache=False), settings
        assert _run([path], settings=settings) == got  # and again from the cache
    assert _run([path]) == plain
    assert _run([path], settings=_settings(world_size=16)) != plain


def test_editing_a_rule_pack_changes_the_result(cache_dir, write, tmp_path):
    path = write(KF, "cfg_8gpu.toml")
    pack = tmp_path / "pack"
    pack.mkdir()
    rule = pack / "X001-team.toml"
    rule.write_text('code = "X001"\nname = "team-rule"\nseverity = "warning"\nsummary = "s"\n'
                    'check = "tp == 1"\nmessage = "first message"\n')
    settings = _settings(rule_dirs=(str(pack),))
    first = _run([path], settings=settings)
    assert "first message" in first[1]
    rule.write_text(rule.read_text().replace("first message", "second message"))
    second = _run([path], settings=settings)
    assert "second message" in second[1] and "first message" not in second[1]


@pytest.mark.parametrize("name, before, after", [
    ("meshlint.toml", '[lint]\nignore = ["ML109"]\n', '[lint]\nignore = []\n'),
    ("pyproject.toml", '[project]\nname = "x"\n', '[project]\nname = "x"\n[tool.meshlint]\ngpus_per_node = 4\n'),
])
def test_editing_the_project_configuration_changes_the_result(cache_dir, write, tmp_path, name, before, after):
    (tmp_path / ".git").mkdir()  # the repository root: the search for a configuration stops here
    config = tmp_path / name
    config.write_text(before)
    path = write(KF, "sub/cfg_8gpu.toml")
    first = _run([path])
    assert _run([path]) == first == _run([path], cache=False)
    config.write_text(after)
    second = _run([path])
    assert second != first
    assert second == _run([path], cache=False)


def test_the_package_code_is_part_of_the_key(tmp_path, monkeypatch):
    package = tmp_path / "meshlint"
    (package / "_rules").mkdir(parents=True)
    (package / "check.py").write_text("x = 1\n")
    (package / "_rules" / "ML101.toml").write_text("code = 1\n")
    monkeypatch.setattr(results_cache, "__file__", str(package / "cli" / "results_cache.py"))
    first = results_cache._code_key()
    assert first and results_cache._code_key() == first
    os.utime(package / "check.py", ns=(1, 1))  # an edit of an editable install
    second = results_cache._code_key()
    (package / "_rules" / "ML102.toml").write_text("")
    third = results_cache._code_key()
    assert len({first, second, third}) == 3


def _installed(tmp_path, record: str):
    """A package laid out as pip installs a wheel: meshlint/ (with _rules/) and its dist-info beside it."""
    from meshlint import __version__

    package = tmp_path / "site-packages" / "meshlint"
    (package / "_rules").mkdir(parents=True)
    (package / "check.py").write_text("x = 1\n")
    (package / "_rules" / "ML101.toml").write_text("code = 1\n")
    dist = package.parent / f"meshlint-{__version__}.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text(record)
    return package, dist / "RECORD"


RECORD = ("../../../bin/meshlint,sha256=AAA,229\nmeshlint/__init__.py,sha256=BBB,121\n"
          "meshlint/check.py,sha256=CCC,6\nmeshlint/_rules/ML101.toml,sha256=DDD,9\n")


def test_an_installed_wheel_is_keyed_by_its_record(tmp_path, monkeypatch):
    # pip's RECORD (every file with its hash) stands for the files: one read, not a stat of each
    package, record = _installed(tmp_path, RECORD)
    monkeypatch.setattr(results_cache, "__file__", str(package / "cli" / "results_cache.py"))
    first = results_cache._code_key()
    assert first and installed.record(str(package)) == record.read_bytes()
    os.utime(package / "check.py", ns=(1, 1))  # a hand edit of installed files: pip's RECORD does not see it
    assert results_cache._code_key() == first
    record.write_text(RECORD.replace("CCC", "EEE"))  # an upgrade or a reinstall of other code
    second = results_cache._code_key()
    assert second != first
    (package / "_rules" / "ML102.toml").write_text("")
    assert results_cache._code_key() == second


@pytest.mark.parametrize("record", [None, "meshlint-0.1.0.dist-info/METADATA,sha256=A,1\n",  # none, or another's
                                    "meshlint/__init__.pyc,sha256=A,1\n"])
def test_without_this_packages_record_each_file_is_statted(tmp_path, monkeypatch, record):
    package, path = _installed(tmp_path, record or "")
    if record is None:
        path.unlink()
    monkeypatch.setattr(results_cache, "__file__", str(package / "cli" / "results_cache.py"))
    assert installed.record(str(package)) is None
    first = results_cache._code_key()
    os.utime(package / "check.py", ns=(1, 1))
    assert first and results_cache._code_key() != first


def test_a_checkout_is_statted_even_beside_a_record(tmp_path, monkeypatch):
    # a source checkout (rules/ beside the package, no _rules inside) is always keyed by its files' stats
    package, _ = _installed(tmp_path, RECORD)
    (package.parent / "rules").mkdir()
    (package / "_rules" / "ML101.toml").rename(package.parent / "rules" / "ML101.toml")
    (package / "_rules").rmdir()
    monkeypatch.setattr(results_cache, "__file__", str(package / "cli" / "results_cache.py"))
    first = results_cache._code_key()
    os.utime(package / "check.py", ns=(1, 1))
    assert first and results_cache._code_key() != first


def test_what_the_key_leaves_out_no_check_imports(tmp_path):
    # results_cache.NOT_CHECKED: the subpackages a check never imports, so their files are not part of the key
    probe = ("import os, sys, runpy\n"
             "def names():\n    print(sorted(m for m in sys.modules if m.startswith('meshlint.')), flush=True)\n"
             "end = os._exit\n"
             "os._exit = lambda code: (names(), end(code))\n"  # the command skips the interpreter's teardown
             "sys.argv = ['meshlint', 'check', '--no-cache', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('meshlint', run_name='__main__')\n"
             "except SystemExit:\n    names()\n")
    paths = [str(FIXTURES / d) for d in ("kempnerforge", "torchtitan", "native", "torchtitan_registry")]
    out = subprocess.run([sys.executable, "-c", probe, *paths], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, MESHLINT_NO_CACHE="1"))
    imported = out.stdout.strip().splitlines()[-1]
    assert "meshlint.engine.check" in imported, out.stderr[-2000:]
    for name in results_cache.NOT_CHECKED:
        assert f"'meshlint.{name}" not in imported, name


# ------------------------------------------------------------------------ what is never cached

def test_registries_fix_diff_and_no_cache_store_nothing(cache_dir, write, monkeypatch):
    registry = next(p for p in check_module.collect_paths([str(FIXTURES / "torchtitan_registry")]) if p.endswith(".py"))
    _run([registry])
    path = write(KF, "cfg_8gpu.toml")
    _run([path], cache=False)
    _run([path], fix=True)
    assert _entries(cache_dir) == []
    monkeypatch.setenv("MESHLINT_NO_CACHE", "1")
    _run([path])
    assert _entries(cache_dir) == []
    monkeypatch.delenv("MESHLINT_NO_CACHE")
    _run([path])
    assert len(_entries(cache_dir)) == 1


def test_the_no_cache_flag(cache_dir, write):
    from conftest import run_cli

    path = write(KF, "cfg_8gpu.toml")
    code, _ = run_cli("check", "--no-cache", str(path))
    assert code in (0, 1) and _entries(cache_dir) == []
    run_cli("check", str(path))
    assert len(_entries(cache_dir)) == 1


@pytest.mark.parametrize("where", ["a-file-in-the-way", "group-writable"])
def test_an_unusable_results_directory_means_no_cache(cache_dir, write, where, spy):
    results = cache_dir / results_cache.SUBDIR
    if where == "group-writable":  # another user could plant entries there: never read, never written
        results.mkdir()
        os.chmod(results, 0o777)
    else:
        results.write_text("")
    path = write(KF, "cfg_8gpu.toml")
    expected = _run([path], cache=False)
    assert _run([path]) == expected == _run([path])
    assert spy == [str(path)] * 3
    assert results.is_file() or os.listdir(results) == []


def test_a_cache_directory_that_cannot_be_made_means_no_cache(tmp_path, monkeypatch, write):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("MESHLINT_CACHE_DIR", str(blocker / "cache"))
    path = write(KF, "cfg_8gpu.toml")
    assert _run([path]) == _run([path], cache=False)


# ------------------------------------------------------------------------ planted entries

class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _planted(good: bytes, marker) -> dict:
    doc = json.loads(good)
    return {
        "garbage": b"\x00\xff not json",
        "truncated": good[: len(good) // 2],
        "pickle": pickle.dumps(_Boom()),
        "huge": b" " * (results_cache.MAX_ENTRY_BYTES + 10) + good,
        "deep": b"[" * 20_000 + b"]" * 20_000,
        "other-key": json.dumps({**doc, "key": "0" * 64}).encode(),
        "other-format": json.dumps({**doc, "format": 99}).encode(),
        "wrong-types": json.dumps({**doc, "findings": [["ML1", "n", "error", "m", None, None, "1", 1, None]]}).encode(),
        "bad-severity": json.dumps({**doc, "findings": [["ML1", "n", "fatal", "m", None, None, 1, 1, None]]}).encode(),
        "bad-status": json.dumps({**doc, "status": "owned"}).encode(),
        "bad-error": json.dumps({**doc, "status": "error", "error": ["ML999", "x", 1, 1, None]}).encode(),
        "huge-int": json.dumps({**doc, "findings": [["ML1", "n", "error", "m", None, None, 10 ** 30, 1, None]]}).encode(),
        "list": b"[]",
    }


PLANTS = ("garbage", "truncated", "pickle", "huge", "deep", "other-key", "other-format", "wrong-types",
          "bad-severity", "bad-status", "bad-error", "huge-int", "list")


@pytest.mark.parametrize("plant", PLANTS)
def test_a_planted_entry_is_ignored_and_rewritten(cache_dir, write, tmp_path, monkeypatch, plant):
    monkeypatch.chdir(tmp_path)
    path = write(KF, "cfg_8gpu.toml")
    expected = _run([path], cache=False)
    _run([path])
    (entry,) = _entries(cache_dir)
    good = _entry_bytes(cache_dir, entry)
    _plant(cache_dir, entry, _planted(good, tmp_path)[plant])
    assert _run([path]) == expected
    assert not (tmp_path / "PWNED").exists()
    assert _entry_bytes(cache_dir, entry) == good  # checked again and stored again as a valid entry
    assert _run([path]) == expected


@pytest.mark.parametrize("how", ["symlink", "group-writable", "index-group-writable"])
def test_an_entry_someone_else_could_have_written_is_not_trusted(cache_dir, write, tmp_path, how, spy):
    path = write(KF, "cfg_8gpu.toml")
    expected = _run([path])
    (entry,) = _entries(cache_dir)
    doc = json.loads(_entry_bytes(cache_dir, entry))
    doc["findings"] = []  # a forged "all clear"
    pack = _plant(cache_dir, entry, json.dumps(doc).encode())
    if how == "symlink":
        target = tmp_path / "forged.pack"
        os.replace(pack, target)
        os.symlink(target, pack)
    elif how == "group-writable":
        os.chmod(pack, 0o666)
    else:
        os.chmod(os.path.join(_results(cache_dir), results_store.INDEX), 0o666)
    spy.clear()
    assert _run([path]) == expected
    assert spy == [str(path)]  # not a hit


def test_a_text_entry_is_completed_for_the_json_report(cache_dir, write, spy):
    path = write(KF, "cfg_8gpu.toml")
    _run([path])
    expected = _run([path], "json", cache=False)
    spy.clear()
    assert _run([path], "json") == expected and spy == [str(path)]  # the text run's entry lacks the JSON entry
    spy.clear()
    assert _run([path], "json") == expected and spy == []


# ------------------------------------------------------------------------ concurrency and size

def _writer(directory: str, key: str, rounds: int) -> None:
    os.environ["MESHLINT_CACHE_DIR"] = directory
    from meshlint.engine.filereport import FileReport
    from meshlint.engine.findings import Finding

    cache = results_cache.open_cache(None)
    report = FileReport("cfg.toml", "checked", dialect="kempnerforge")
    report.findings = [Finding("ML105", "world-size-unknown", "warning", "m" * 2000, None, None, 1, 1)]
    for _ in range(rounds):
        cache.store(key, report, "error")
    cache.close()  # publishes the run's pack in the index


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_processes_writing_one_entry_leave_a_valid_one(cache_dir):
    key = "ab" * 32
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_writer, args=(str(cache_dir), key, 200)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    cache = results_cache.open_cache(None)
    assert cache._dir_usable()
    report = cache._load(key, "cfg.toml", False)
    assert report is not None and report.findings[0].code == "ML105"
    names = os.listdir(_results(cache_dir))
    assert "index" in names and not [n for n in names if n.endswith(".tmp")]  # no temporary file left
    assert 1 <= len([n for n in names if n.endswith(".pack")]) <= 2  # the loser's pack, if it lost a race


def _records(n: int, size: int = 100) -> dict:
    return {i.to_bytes(32, "big"): (b"p" * 8, i * size, size, i) for i in range(n)}


def test_prune_keeps_the_newest():
    kept = results_store._newest(_records(12), set(), keep=5, most_bytes=1 << 20)
    assert sorted(int.from_bytes(k, "big") for k in kept) == list(range(7, 12))


def test_prune_keeps_what_the_run_used_and_stays_within_its_bytes():
    used = {i.to_bytes(32, "big") for i in (0, 1)}  # the oldest two, read by this run: kept before newer ones
    kept = results_store._newest(_records(12), used, keep=5, most_bytes=1 << 20)
    assert sorted(int.from_bytes(k, "big") for k in kept) == [0, 1, 9, 10, 11]
    kept = results_store._newest(_records(12), set(), keep=5, most_bytes=250)
    assert sorted(int.from_bytes(k, "big") for k in kept) == [10, 11]


def test_a_run_writes_two_files_however_many_configs_it_stores(tmp_path, cache_dir):
    """A cold run's entries go into one pack, published with the index: not a file per config."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(12):
        (tree / f"c{i}.toml").write_text(f"{KF}\n# config {i}\n")
    expected = _run([tree], cache=False)
    assert _run([tree]) == expected
    assert sorted(n.rsplit(".", 1)[-1] for n in os.listdir(_results(cache_dir))) == ["index", "pack"]
    assert len(_entries(cache_dir)) == 12 and _run([tree]) == expected


def test_edits_leave_the_packs_about_the_size_of_their_entries(tmp_path, cache_dir, monkeypatch):
    """Entries replaced run after run leave dead bytes in old packs: past twice the live bytes (or too many packs)
    the live entries are copied into one new pack and the old ones deleted."""
    monkeypatch.setattr(results_store, "MAX_PACKS", 3)
    path = tmp_path / "c.toml"
    for i in range(8):
        path.write_text(f"{KF}\n# edit {i}\n")
        _run([path])
        packs = [n for n in os.listdir(_results(cache_dir)) if n.endswith(".pack")]
        assert len(packs) <= 3
    assert len(_entries(cache_dir)) == 8
    path.write_text(f"{KF}\n# edit 0\n")
    assert _run([path]) == _run([path], cache=False)


def test_a_damaged_index_is_a_miss_and_is_written_again(tmp_path, cache_dir, write, spy):
    path = write(KF, "cfg_8gpu.toml")
    expected = _run([path])
    index = os.path.join(_results(cache_dir), results_store.INDEX)
    with open(index, "r+b") as f:
        f.truncate(os.path.getsize(index) - 7)
    spy.clear()
    assert _run([path]) == expected and spy == [str(path)]
    spy.clear()
    assert _run([path]) == expected and spy == []


def test_the_cache_grows_to_the_tree_a_run_checks_and_stays_bounded(tmp_path, cache_dir, monkeypatch):
    # past MAX_ENTRIES configs, a run keeps every entry it used: its next run is answered from the cache
    from meshlint.cli.lint import run

    monkeypatch.setattr(results_cache, "MAX_ENTRIES", 4)
    monkeypatch.setattr(results_cache, "PRUNE_TO", 2)
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(10):
        (tree / f"c{i}.toml").write_text(f"{KF}\n# config {i}\n")
    assert run([str(tree)], fmt="json") in (0, 1)
    assert len(_entries(cache_dir)) == 10  # 2 x 10 used: nothing pruned (before: pruned to PRUNE_TO)
    for i in range(3):
        (tree / f"c{i}.toml").write_text(f"{KF}\n# changed {i}\n")
    run([str(tree)], fmt="json")
    assert len(_entries(cache_dir)) == 13
    other = tmp_path / "other.toml"  # a run on one file: the directory goes back within its bounds
    other.write_text(KF)
    run([str(other)], fmt="json")
    assert len(_entries(cache_dir)) == 1 + 2
