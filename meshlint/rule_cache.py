"""A cache of parsed (and, for user packs, schema-validated) rule files.

Parsing ~30 rule files and their expressions costs ~20 ms per run, and
validating a user pack with jsonschema ~150 ms: both are paid once per change
of the rule files instead of on every pre-commit run. The key covers
meshlint's version and every rule file's path, size and mtime, so any edit
invalidates it. The cache is meshlint's own file under ``$MESHLINT_CACHE_DIR``,
``$XDG_CACHE_HOME/meshlint`` or ``~/.cache/meshlint``; a read-only or missing
home just means no cache. ``MESHLINT_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import os
import pickle
import zlib

from meshlint import __version__


def cache_dir() -> str | None:
    if os.environ.get("MESHLINT_NO_CACHE"):
        return None
    explicit = os.environ.get("MESHLINT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "meshlint")


def key_for(dirs: list) -> str | None:
    """Everything the parsed rules depend on, as one string (stored in the cache and compared)."""
    parts = [f"meshlint {__version__} rules v1"]
    try:
        # the pickled objects are defined here: a changed module means a stale cache
        here = os.path.dirname(os.path.abspath(__file__))
        for module in ("expr.py", "rules.py"):
            parts.append(f"{module} {os.stat(os.path.join(here, module)).st_mtime_ns}")
        for directory, origin in dirs:
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                if entry.name.endswith(".toml") and entry.name != "models.toml" and entry.is_file():
                    st = entry.stat()
                    parts.append(f"{origin} {os.path.abspath(entry.path)} {st.st_size} {st.st_mtime_ns}")
    except OSError:
        return None
    return "\n".join(parts)


def key_for_files(label: str, paths: list) -> str | None:
    """The key of data parsed from ``paths`` (the built-in model table): their sizes and mtimes."""
    parts = [f"meshlint {__version__} {label} v1"]
    try:
        for path in paths:
            st = os.stat(path)
            parts.append(f"{os.path.abspath(path)} {st.st_size} {st.st_mtime_ns}")
    except OSError:
        return None
    return "\n".join(parts)


def _file_for(directory: str, key: str) -> str:
    # a cheap checksum names the file; the full key inside it is what is trusted
    return os.path.join(directory, f"rules-{zlib.crc32(key.encode()):08x}.pickle")


def load(key: str | None):
    directory = cache_dir()
    if not key or not directory:
        return None
    try:
        with open(_file_for(directory, key), "rb") as f:
            stored_key, rules = pickle.load(f)
    except Exception:  # missing, truncated, or from an incompatible build: just re-parse
        return None
    return rules if stored_key == key else None


def store(key: str | None, rules: list) -> None:
    directory = cache_dir()
    if not key or not directory:
        return
    try:
        import tempfile

        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rules-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump((key, rules), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, _file_for(directory, key))
        _prune(directory, keep=8)
    except OSError:
        pass  # a read-only home is fine: the cache is only an optimisation


def _prune(directory: str, keep: int) -> None:
    """Drop all but the newest ``keep`` cache files (each rule edit makes a new one)."""
    entries = [e for e in os.scandir(directory) if e.name.startswith("rules-") and e.name.endswith(".pickle")]
    entries.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
    for entry in entries[keep:]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass
