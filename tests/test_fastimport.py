"""meshlint/fastimport.py: a module imported through its finder is the module the import system gives, and
anything it cannot vouch for is left to the import system."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from meshlint import fastimport

# Every module of the static path and what each one's import leaves behind (the smoke package imports torch).
_DESCRIBE = r"""
import json, pkgutil, sys
if sys.argv[1] == "fast":
    from meshlint import fastimport
    fastimport.install()
import meshlint
out = {}
for info in pkgutil.walk_packages(meshlint.__path__, "meshlint."):
    if ".smoke" in info.name or info.name.startswith("meshlint.generate"):
        continue
    __import__(info.name)
for name, m in sorted(sys.modules.items()):
    if not name.startswith("meshlint.") or name == "meshlint.fastimport":
        continue
    spec = m.__spec__
    fn = next((v for v in vars(m).values() if getattr(v, "__module__", None) == name
               and hasattr(v, "__code__")), None)
    out[name] = {
        "file": m.__file__, "cached": m.__cached__, "package": m.__package__, "path": getattr(m, "__path__", None),
        "spec": [spec.name, spec.origin, spec.cached, spec.has_location, spec.parent,
                 spec.submodule_search_locations],
        "loader": [m.__loader__.name, m.__loader__.path, m.__loader__.is_package(name),
                   m.__loader__.get_source(name) == open(m.__file__, encoding="utf-8").read()],
        "co_filename": fn.__code__.co_filename if fn else None,
        "names": sorted(vars(m)),
        "fast": type(m.__loader__).__module__ == "meshlint.fastimport",
    }
print(json.dumps(out))
"""


def _describe(way: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _DESCRIBE, way], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_a_module_through_the_finder_is_the_module_the_import_system_gives(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    standard = _describe("standard", env)  # also writes the bytecode the finder then reads
    fast = _describe("fast", env)
    assert set(fast) == set(standard) and len(fast) > 150
    assert sum(m["fast"] for m in fast.values()) > 0.9 * len(fast)  # nearly all through the finder
    assert not any(m["fast"] for m in standard.values())
    for name in standard:
        ours, theirs = dict(fast[name]), dict(standard[name])
        ours.pop("fast"), theirs.pop("fast")
        assert ours == theirs, name


def _module(tmp_path: Path, source: str = "X = 1\n") -> tuple[Path, str]:
    package = tmp_path / "meshlint_probe"
    package.mkdir(exist_ok=True)
    (package / "mod.py").write_text(source)
    return package, "meshlint.probe_pkg.mod"


def _compile(path: Path, mode=None) -> None:
    import importlib.util
    import py_compile

    kwargs = {} if mode is None else {"invalidation_mode": mode}
    py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)), **kwargs)


def test_it_answers_only_for_current_timestamp_bytecode(tmp_path, monkeypatch):
    import py_compile

    monkeypatch.setattr(sys, "pycache_prefix", None)
    package, name = _module(tmp_path)
    source = package / "mod.py"
    assert fastimport.Finder.find_spec(name, [str(package)]) is None  # no bytecode yet: the import system's
    _compile(source)
    spec = fastimport.Finder.find_spec(name, [str(package)])
    assert spec is not None and spec.origin == f"{package}/mod.py" and spec.cached.endswith(".pyc")
    assert fastimport.Finder.find_spec("other.mod", [str(package)]) is None  # not meshlint's
    assert fastimport.Finder.find_spec(name, None) is None and fastimport.Finder.find_spec(name, ["a", "b"]) is None
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))  # edited since: stale bytecode
    assert fastimport.Finder.find_spec(name, [str(package)]) is None
    _compile(source, py_compile.PycInvalidationMode.CHECKED_HASH)  # hash-based: the import system checks it
    assert fastimport.Finder.find_spec(name, [str(package)]) is None
    _compile(source)
    cached = Path(fastimport.Finder.find_spec(name, [str(package)]).cached)
    cached.write_bytes(b"\0\0\0\0" + cached.read_bytes()[4:])  # another interpreter's magic
    assert fastimport.Finder.find_spec(name, [str(package)]) is None


@pytest.mark.parametrize("prefix", ["/tmp/pyc", "/tmp/pyc/", "/", "relative/pyc"])
def test_under_a_pycache_prefix_it_reads_the_bytecode_where_the_import_system_keeps_it(tmp_path, monkeypatch, prefix):
    import importlib.util

    monkeypatch.setattr(sys, "pycache_prefix", prefix)
    package, name = _module(tmp_path)
    cached = Path(importlib.util.cache_from_source(str(package / "mod.py")))
    if not cached.is_absolute():
        monkeypatch.chdir(tmp_path)
        cached = Path(importlib.util.cache_from_source(str(package / "mod.py")))
    try:
        _compile(package / "mod.py")
    except OSError:
        pytest.skip(f"cannot write bytecode under {prefix}")
    try:
        spec = fastimport.Finder.find_spec(name, [str(package)])
        assert spec is not None and spec.cached == str(cached)
    finally:
        if cached.is_relative_to(tmp_path) or prefix.startswith("/tmp/pyc"):
            cached.unlink(missing_ok=True)


def test_under_optimization_the_import_system_finds_the_opt_bytecode(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    package, name = _module(tmp_path)
    _compile(package / "mod.py")
    assert fastimport.Finder.find_spec(name, [str(package)]) is not None
    monkeypatch.setattr(sys, "flags", type("Flags", (), {"optimize": 1})())
    assert fastimport.Finder.find_spec(name, [str(package)]) is None  # python -O: mod.cpython-311.opt-1.pyc


def test_the_loader_runs_the_bytecode_it_read_and_reports_the_source(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    package, name = _module(tmp_path, "def f():\n    return 41 + 1\n")
    _compile(package / "mod.py")
    (package / "mod.py").write_text("def f():\n    return 41 + 1\n")  # same size, same second: still current
    spec = fastimport.Finder.find_spec(name, [str(package)])
    if spec is None:
        pytest.skip("the rewrite moved the modification time to another second")
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.f() == 42 and module.__file__ == str(package / "mod.py")
    assert module.f.__code__.co_filename == str(package / "mod.py")
    assert spec.loader.get_source(name).startswith("def f")


def test_no_meshlint_package_has_a_module_and_a_subpackage_of_one_name():
    """The import system would take the subpackage; the finder looks for the module first."""
    clashes = [str(p) for p in (ROOT / "meshlint").rglob("*.py")
               if (p.parent / p.stem / "__init__.py").is_file()]
    assert clashes == []


def test_the_command_runs_with_it_and_says_the_same(tmp_path):
    config = ROOT / "fixtures" / "kempnerforge" / "7b_32gpu_fsdp.toml"
    env = dict(os.environ, MESHLINT_NO_CACHE="1", PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = ("import sys\nfrom meshlint.cli import entry\nsys.argv = ['meshlint', 'check', sys.argv[1]]\n"
            "entry.console()")
    plain = ("import sys\nfrom meshlint.cli import entry\nsys.argv = ['meshlint', 'check', sys.argv[1]]\n"
             "entry.main()")
    fast = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, env=env, cwd=ROOT)
    standard = subprocess.run([sys.executable, "-c", plain, str(config)], capture_output=True, text=True, env=env,
                              cwd=ROOT)
    assert (fast.returncode, fast.stdout, fast.stderr) == (standard.returncode, standard.stdout, standard.stderr)
    assert "ML" in fast.stdout
