"""A private on-disk store of JSON entries that cannot run code: where it lives, when it is trusted, and
the codecs that turn a value into an entry and back.

The rule cache (meshlint/engine/rule_cache.py: parsed rule files) and the built-in model tables
(meshlint/frameworks/models.py) each register a codec for their kind of value here, so the store
depends on neither; the results cache (meshlint/cli/results_cache.py) shares its trust rules
(``trusted_dir``, ``read_private``). Where it lives, what it trusts and why that is safe: the
docstring of meshlint/engine/rule_cache.py.
"""

from __future__ import annotations

import os
import stat
import zlib

from meshlint import __version__
from meshlint.fileread import read_upto

FORMAT = 3                 # of the JSON entries; 1 was pickle (never read: old *.pickle files are deleted);
                           # 2 held trees as JSON lists (ignored now: rebuilt in format 3)
MAX_ENTRY_BYTES = 8 << 20  # a bigger entry is not one meshlint wrote
KEEP = 8                   # entries kept (each rule edit makes a new one)


def cache_dir() -> str | None:
    if os.environ.get("MESHLINT_NO_CACHE"):
        return None
    explicit = os.environ.get("MESHLINT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "meshlint")


def key_for_files(label: str, paths: list) -> str | None:
    """The key of data parsed from ``paths`` (the built-in model table): their sizes and mtimes."""
    parts = [f"meshlint {__version__} {label} v{FORMAT}"]
    try:
        for path in paths:
            st = os.stat(path)
            parts.append(f"{os.path.abspath(path)} {st.st_size} {st.st_mtime_ns}")
    except OSError:
        return None
    return "\n".join(parts)


def _file_for(directory: str, key: str) -> str:
    # a cheap checksum names the file; the full key inside it is what is compared
    return os.path.join(directory, f"rules-{zlib.crc32(key.encode()):08x}.json")


# ------------------------------------------------------------------------------------- trust

def _owned(st: os.stat_result) -> bool:
    """Owned by this user (where the platform has users)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid is None or st.st_uid == geteuid()


def _owned_private(st: os.stat_result) -> bool:
    """Owned by this user and not writable by group or others."""
    return _owned(st) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _trusted_dir(directory: str) -> bool:
    try:
        st = os.stat(directory)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if _owned_private(st):
        return True
    if not os.environ.get("MESHLINT_CACHE_DIR") and _owned(st):
        # meshlint's own default directory, made group-writable by a umask: make it private again
        # (a directory given in MESHLINT_CACHE_DIR is the user's to set: there it is only ignored)
        try:
            os.chmod(directory, 0o700)
            return True
        except OSError:
            return False
    return False


# the same trust rules for the results cache (meshlint/cli/results_cache.py; its entries: read_private)
trusted_dir = _trusted_dir


# ------------------------------------------------------------------------------------- load / store

_O_PRIVATE = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
              | getattr(os, "O_NOCTTY", 0))


def open_private(path: str, limit: int) -> tuple | None:
    """(a descriptor open for reading, the size) of a cache file, or None unless it is a regular file (not a link,
    FIFO or device) of at most ``limit`` bytes that this user owns and no one else can write: the trust rule of
    both caches. The caller closes the descriptor."""
    try:
        fd = os.open(path, _O_PRIVATE)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode) or not _owned_private(st) or st.st_size > limit:
        os.close(fd)
        return None
    return fd, st.st_size


def read_private(path: str, limit: int) -> bytes | None:
    """The bytes of a cache file that ``open_private`` trusts, or None."""
    opened = open_private(path, limit)
    if opened is None:
        return None
    fd, size = opened
    try:
        raw = read_upto(fd, limit, size)
    except OSError:
        return None
    finally:
        os.close(fd)
    return raw if len(raw) <= limit else None


def load(key: str | None):
    """The value stored under ``key`` (decoded by the codec of its kind), or None."""
    directory = cache_dir()
    if not key or not directory or not _trusted_dir(directory):
        return None
    raw = read_private(_file_for(directory, key), MAX_ENTRY_BYTES)
    if raw is None:
        return None
    try:
        from meshlint import jsonfast  # json's own C scanner, without json's import (and re's)

        doc = jsonfast.loads(raw)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
            return None
        return decode(doc.get("kind"), doc.get("value"))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, Bad):
        return None  # malformed, truncated or foreign: rebuilt from the rule files


def store(key: str | None, value) -> None:
    directory = cache_dir()
    if not key or not directory:
        return
    try:
        kind, encoded = encode(value)
    except Bad:
        return  # something JSON cannot hold (a date in a rule's params): just not cached
    try:
        from meshlint import jsonfast

        text = jsonfast.dumps_compact({"format": FORMAT, "meshlint": __version__, "key": key, "kind": kind,
                                       "value": encoded})
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if not _trusted_dir(directory):
            return  # a directory others can write: never used, so never written either
        write_private(_file_for(directory, key), text.encode("utf-8", "surrogatepass"))
        _prune(directory, keep=KEEP)
    except (OSError, ValueError, TypeError, RecursionError):
        pass  # a read-only home is fine: the cache is only an optimisation


def write_private(final: str, data: bytes) -> None:
    """``data`` as the file ``final``, readable by its owner only, whole or not at all: written to a new
    temporary file beside it (never following a link, never an existing file), then renamed over it.
    Raises OSError; leaves no temporary file behind."""
    tmp = f"{final}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        _unlink(tmp)
        raise


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``: os.write, not a file object (building one costs more than a results entry's whole
    store). Raises OSError."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _prune(directory: str, keep: int) -> None:
    """Drop all but the newest ``keep`` entries, and every pickle an older meshlint left."""
    entries = []
    for e in os.scandir(directory):
        if e.name.startswith("rules-") and e.name.endswith(".pickle"):
            _unlink(e.path)
        elif e.name.startswith("rules-") and e.name.endswith(".json"):
            entries.append(e)
    entries.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
    for entry in entries[keep:]:
        _unlink(entry.path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

# ------------------------------------------------------------------------------------- codecs

class Bad(Exception):
    """A value that cannot be stored, or an entry that is not one meshlint wrote."""


# kind -> (accepts(value), encode(value) -> JSON data, decode(JSON data) -> value), in registration order
_CODECS: dict = {}


def register(kind: str, accepts, encoder, decoder) -> None:
    """Store values ``accepts`` says yes to as entries of ``kind`` (each module registers its own kind)."""
    _CODECS[kind] = (accepts, encoder, decoder)


def encode(value) -> tuple[str, object]:
    for kind, (accepts, encoder, _decoder) in _CODECS.items():
        if accepts(value):
            return kind, encoder(value)
    raise Bad("not a cacheable value")


def decode(kind, value):
    codec = _CODECS.get(kind) if isinstance(kind, str) else None
    if codec is None:
        raise Bad("unknown kind")
    return codec[2](value)


def plain(value):
    """``value`` if it is plain JSON data (what TOML gives, minus dates and non-finite floats)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Bad("non-finite float")
        return value
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v) for k, v in value.items()}
    raise Bad(f"cannot store a {type(value).__name__}")


def want(value, kind: type, length: int | None = None):
    if not isinstance(value, kind) or (length is not None and len(value) != length):
        raise Bad("shape")
    return value
