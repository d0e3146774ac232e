"""Importing meshlint's own modules from their cached bytecode with a tenth of the import system's generic work.

A check imports some seventy of meshlint's modules. For each, the import system asks every finder,
lists and stats directories, builds path strings, opens the bytecode through a buffered file object and
validates it, about 0.3 M instructions and a dozen system calls a module: a tenth of a first run on
KempnerForge's 30 configs. The ``meshlint`` command (meshlint/cli/entry.py) puts this finder first: for a
module or subpackage of a meshlint package (``meshlint.engine.run``: a ``run.py`` in the package's one
directory; ``meshlint.engine.expr``: its ``expr/__init__.py``) whose bytecode sits where the import system keeps it (``__pycache__``, or ``sys.pycache_prefix``), is a
timestamp-checked .pyc of this interpreter and matches the source's size and modification time, it
returns the spec the import system would, with a loader (``SourceFileLoader``, so resources, source and
tracebacks are as usual) that runs that bytecode. Anything else (a missing, stale, hash-based
or foreign .pyc, a source that is not there, a package spread over several directories) is left to the
import system itself, which also writes the bytecode where it is missing. The module is the same either
way: tests/test_fastimport.py compares every attribute a module gets.
"""

from __future__ import annotations

import marshal
import os
import sys

from meshlint.fileread import read_upto

_bootstrap = sys.modules["_frozen_importlib"]
_external = sys.modules["_frozen_importlib_external"]
_imp = sys.modules["_imp"]
_PREFIX = "meshlint."
_TAG = sys.implementation.cache_tag
_MAGIC = _external.MAGIC_NUMBER
_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_MOST = 1 << 30  # no bytecode file is near this: read_upto's bound, never reached


class _Loader(_external.SourceFileLoader):
    """A SourceFileLoader whose code comes from the bytecode the finder read (once; then as usual)."""

    def __init__(self, fullname: str, path: str, data):
        super().__init__(fullname, path)
        self._data = data

    def get_code(self, fullname):
        data, self._data = self._data, None
        if data is None or fullname != self.name:
            return super().get_code(fullname)
        code = marshal.loads(data)
        _imp._fix_co_filename(code, self.path)
        return code


class Finder:
    """The meta path finder (see the module's docstring)."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None):
        if path is None or len(path) != 1 or not fullname.startswith(_PREFIX) or sys.flags.optimize:
            return None  # (under -O the bytecode is an .opt-N.pyc: the import system's to find)
        directory = path[0]
        name = fullname.rpartition(".")[2]
        source = f"{directory}/{name}.py"
        package = None
        try:
            st = os.stat(source)
        except (OSError, ValueError):
            package = f"{directory}/{name}"  # a subpackage: its __init__.py
            source = f"{package}/__init__.py"
            directory, name = package, "__init__"
            try:
                st = os.stat(source)
            except (OSError, ValueError):
                return None
        prefix = sys.pycache_prefix
        if prefix is None:
            cached = f"{directory}/__pycache__/{name}.{_TAG}.pyc"
        elif prefix and prefix[-1:] != "/" and directory[:1] == "/" and directory[1:2] != "/" and directory[-1:] != "/":
            cached = f"{prefix}{directory}/{name}.{_TAG}.pyc"  # what cache_from_source gives such a path, ~20 K fewer
            # instructions a module (tests/test_fastimport.py compares the two)
        else:
            cached = _external.cache_from_source(source)
        data = _read(cached)
        if (data is None or len(data) < 16 or data[:4] != _MAGIC or data[4:8] != b"\0\0\0\0"
                or int.from_bytes(data[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
                or int.from_bytes(data[12:16], "little") != st.st_size & 0xFFFFFFFF):
            return None  # anything unusual is the import system's to do (no meshlint package has a module and a
            # subpackage of one name, where the subpackage would win: tests/test_fastimport.py)
        spec = _bootstrap.ModuleSpec(fullname, _Loader(fullname, source, memoryview(data)[16:]), origin=source,
                                     is_package=package is not None)
        if package is not None:
            spec.submodule_search_locations.append(package)
        spec.has_location = True
        spec.cached = cached
        return spec


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, _READ)
    except (OSError, ValueError):
        return None
    try:  # a buffer of the file's size: a larger one costs the system a mapping of its own
        return read_upto(fd, _MOST, os.fstat(fd).st_size)
    except OSError:
        return None
    finally:
        os.close(fd)


def install() -> None:
    """Put the finder first (once)."""
    if not any(f is Finder for f in sys.meta_path):
        sys.meta_path.insert(0, Finder)
