"""A per-file cache of ``meshlint check`` results, keyed by a hash of everything a result depends on, stored as verified JSON.

Like ruff's cache: a pre-commit run or a CI job that checks the same configs
again answers each unchanged file from a small JSON entry instead of parsing,
resolving and running every rule on it. Only TOML configs are cached (their
result depends on nothing but the inputs below); registries, launch scripts,
saved configs, ``--fix``, ``--diff-base`` and launch lines always take the
normal path.

The key of a file is the BLAKE2b (32 bytes) of:

* the file's bytes (the very bytes then checked on a miss), its path as shown
  in reports, its absolute path and the working directory;
* meshlint's version, the Python version, and the size and modification time
  of every file of the installed package (code, ``data/``, built-in rules), so
  an edit to an editable install is a new key;
* every command-line setting that can change a result (``CliSettings``: world
  size, nodes, GPUs per node, placement, dialect, rule packs, select/ignore,
  fail-on, GPU memory, torchtitan version and root, --config, --isolated);
* the project configuration that governs the file (its path and bytes; and the
  bytes of every ``pyproject.toml`` passed on the way up to it, which meshlint
  parses too), and the bytes of every ``*.toml`` in each rule pack in use
  (rules and ``models.toml``).

No environment variable changes a result (``NO_COLOR``, ``FORCE_COLOR`` and
``GITHUB_WORKSPACE`` change only the rendering, which is never cached).

An entry holds what the reports need (status, dialect, note, input error,
findings, suppressed findings, the file's ``--fail-on``, and for the JSON report
the file's entry): JSON only, never pickle or anything that runs code. It is
read only from a directory and files that belong to the user and that no one
else can write (meshlint/cachestore.py's trust rules), checked field by field, and used
only if it carries this format and exactly the key asked for; anything else is
ignored and rewritten. A run's entries go into one pack file, published with the
index when the run ends (meshlint/cli/results_store.py: two files written for a run,
not one per config). Entries of at most ``MAX_ENTRY_BYTES`` each are kept up to
``MAX_ENTRIES``, or twice as many as the run used, whichever is more, but never past
``MOST_ENTRIES`` or ``MOST_BYTES``: the oldest go first, those the run read or wrote
last, so a tree of 10,000 configs is answered from the cache on its next run. ``--no-cache`` or ``MESHLINT_NO_CACHE=1`` turns it off; a directory
that cannot be written just means no cache.
"""

from __future__ import annotations

import os
import sys

from meshlint import __version__
from meshlint.fileread import read_regular as _read_regular

FORMAT = 4  # 2: a finding carries its skip-note flag; 3: keys are BLAKE2b; 4: entries in packs (results_store)
SUBDIR = "results"
MAX_ENTRY_BYTES = 64 << 10   # a bigger result is simply not cached (a typical entry is 1-10 KiB)
MAX_ENTRIES = 1000           # past this many (or twice the entries a run used), the oldest are deleted down to
PRUNE_TO = 750               # this many more than the run used: the cache grows to the tree it serves,
MOST_ENTRIES = 50_000        # up to this many entries
MOST_BYTES = 256 << 20       # and this many bytes in all
MAX_INPUT_BYTES = 1 << 20    # = limits.MAX_FILE_BYTES: a bigger file takes the normal path (which refuses it)
STATUSES = ("checked", "skipped", "error")
SEVERITIES = ("error", "warning", "info")
FAIL_ON = ("error", "warning", "info", "never")

_SCANDIR_FD = os.scandir in os.supports_fd and os.sep == "/"
_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_CODE_KEY: list = []         # [key] once computed in this process ([None]: the package cannot be hashed)


def open_cache(settings) -> "ResultsCache | None":
    """The results cache for a run with these ``settings`` (None: the defaults), or None when it is off."""
    from meshlint import cachestore

    base = cachestore.cache_dir()  # None when MESHLINT_NO_CACHE is set
    if not base:
        return None
    code = code_key()
    if code is None:
        return None
    try:
        return ResultsCache(base, settings, code)
    except (OSError, ValueError):  # a working directory that no longer exists
        return None


def code_key() -> str | None:
    """A hash of meshlint's own files (size and mtime of each .py, data file and built-in rule), once per process."""
    if not _CODE_KEY:
        _CODE_KEY.append(_code_key())
    return _CODE_KEY[0]


# Subpackages no check imports (tests/test_results_cache.py holds a check to that): the generators that write the
# package's data (what they wrote is hashed, as any data file) and the smoke mode. Not statting their ~60 files spares
# every run ~1 M instructions.
NOT_CHECKED = ("generate", "smoke")


def _code_key() -> str | None:
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the meshlint package
    head = f"meshlint {__version__}\0{sys.version}\0{sys.implementation.cache_tag}\0{here}\0"
    wheel = os.path.isdir(os.path.join(here, "_rules"))  # in a wheel the built-in rules are inside (meshlint/_rules)
    record = None
    if wheel:
        from meshlint import installed

        record = installed.record(here)
    if record is not None:  # installed by pip: what it wrote, each file with its hash (meshlint/installed.py)
        # two 32-bit checksums and the length of its ~60 KB (its lines hold each file's SHA-256 already): a fifth
        # of BLAKE2b's cost; two installs of one version at one path that differ yet match in all three: ~2**-64
        import zlib

        made = f"{zlib.crc32(record)} {zlib.adler32(record)} {len(record)}"
        return _hasher()(f"{head}installed {made}".encode("utf-8", "surrogatepass")).hexdigest()
    roots = [(here, "")]  # (directory, its name in the key)
    if not wheel:  # a source checkout: rules/ beside it (rules.builtin_rules_dir)
        roots.append((os.path.join(os.path.dirname(here), "rules"), "../rules/"))
    # names relative to the package, and the numbers apart (one repr for all): ~0.4 M fewer instructions than a
    # formatted line per file, over ~400 files
    names: list = []
    numbers: list = []
    try:
        while roots:
            directory, shown = roots.pop()
            # listed through an open descriptor where the system can: each stat then resolves one name, not the
            # whole path (~20 % less system time over ~400 files)
            fd = os.open(directory, _O_DIR) if _SCANDIR_FD else None
            try:
                with os.scandir(directory if fd is None else fd) as entries:
                    for entry in entries:
                        name = entry.name
                        if entry.is_dir(follow_symlinks=False):
                            if name != "__pycache__" and (shown or name not in NOT_CHECKED):
                                roots.append((f"{directory}/{name}", f"{shown}{name}/"))
                        else:
                            st = entry.stat()
                            names.append(shown + name)
                            numbers.append(st.st_size)
                            numbers.append(st.st_mtime_ns)
            finally:
                if fd is not None:
                    os.close(fd)
    except OSError:
        return None  # a package that cannot be listed: no results cache
    # in listing order: a directory lists in the same order while it is unchanged (a reordered one is at worst a
    # new key, a miss)
    h = _hasher()(head.encode("utf-8", "surrogatepass"))
    h.update("\0".join(names).encode("utf-8", "surrogatepass"))
    h.update(repr(numbers).encode())
    return h.hexdigest()


def read_regular(path: str, limit: int = MAX_INPUT_BYTES) -> bytes | None:
    """fileread.read_regular, at most an input's size by default."""
    return _read_regular(path, limit)


def _hasher():
    """BLAKE2b with a 32-byte digest, from its C module without hashlib's import (~3 ms of OpenSSL set-up a cached
    run would pay for nothing). Not SHA-256: CPython's own SHA-256 costs ~52 instructions a byte, BLAKE2b ~18, and
    a first run hashes every config and the package's file list (~100 KB for 30 configs)."""
    if not _HASHER:
        try:
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover - a build without the built-in module
            from hashlib import blake2b
        _HASHER.append(lambda data=b"": blake2b(data, digest_size=32))
    return _HASHER[0]


_HASHER: list = []


def _digest(data: bytes) -> str:
    return _hasher()(data).hexdigest()


class ResultsCache:
    """One run's view of the cache: computes keys, answers lookups, stores results."""

    def __init__(self, base: str, settings, code: str):
        self.base = base
        self.directory = os.path.join(base, SUBDIR)
        self.settings = settings
        self.stored = 0
        self.used: set = set()      # the entries this run read or wrote: the last to be pruned
        self._failed = False
        self._usable: bool | None = None
        self._projects: dict = {}   # directory of a checked file -> key part of its project configuration
        self._packs: dict = {}      # rule directories -> key part of their contents
        self._finder = None
        self._store = None          # results_store.PackStore, once the directory is known usable
        self._run_key = "\0".join(["meshlint-results", str(FORMAT), code, os.getcwd(), _settings_key(settings)])

    # ------------------------------------------------------------------------------- keys

    def key_for(self, path: str, raw: bytes) -> str | None:
        """The key of ``path`` holding ``raw``; None when some input it depends on cannot be keyed."""
        absolute = os.path.abspath(path)
        project = self._project_key(path, absolute)
        if project is None:
            return None
        # the run's key, the project's, the file's absolute and shown paths and its bytes, each after a NUL
        h = _hasher()(f"{self._run_key}\0{project}\0{absolute}\0{path}\0".encode("utf-8", "surrogatepass"))
        h.update(raw)
        return h.hexdigest()

    def _project_key(self, path: str, absolute: str) -> str | None:
        settings = self.settings
        rule_dirs = tuple(settings.rule_dirs) if settings is not None else ()
        if settings is not None and settings.isolated:
            return self._with_packs("isolated", rule_dirs)
        if settings is not None and settings.config:
            return self._parsed_project_key(path, rule_dirs)
        directory = os.path.dirname(absolute)
        if directory in self._projects:
            return self._projects[directory]
        key = self._walk(path, directory, rule_dirs)
        self._projects[directory] = key
        return key

    def _walk(self, path: str, start: str, rule_dirs: tuple) -> str | None:
        """config.Finder's walk, without parsing TOML when it can be avoided: a pyproject.toml that never
        writes ``meshlint`` (nor a ``\\u`` escape that could spell it) has no [tool.meshlint] table."""
        parts = []
        directory = start
        while True:
            if os.path.isfile(os.path.join(directory, "meshlint.toml")):
                return self._parsed_project_key(path, rule_dirs)
            pyproject = os.path.join(directory, "pyproject.toml")
            if os.path.isfile(pyproject):
                data = read_regular(pyproject)
                if data is None:
                    return None
                if b"meshlint" in data or b"\\u" in data or b"\\U" in data:
                    return self._parsed_project_key(path, rule_dirs)
                parts.append(f"{pyproject} {_digest(data)}")  # parsed by meshlint too: an invalid one is an error
            if os.path.isdir(os.path.join(directory, ".git")):
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        return self._with_packs("no project configuration\0" + "\0".join(parts), rule_dirs)

    def _parsed_project_key(self, path: str, rule_dirs: tuple) -> str | None:
        from meshlint.cli import project_config as config
        from meshlint.errors import MeshlintError

        try:
            if self._finder is None:
                self._finder = config.Finder(self.settings.config if self.settings is not None else None)
            cfg = self._finder.for_path(path)
        except MeshlintError:
            return None  # the normal path reports it
        if cfg.path is None:
            return self._with_packs("no project configuration (parsed)", rule_dirs)
        data = read_regular(cfg.path)
        if data is None:
            return None
        return self._with_packs(f"project {os.path.abspath(cfg.path)} {_digest(data)}", tuple(cfg.rules) + rule_dirs)

    def _with_packs(self, head: str, rule_dirs: tuple) -> str | None:
        if not rule_dirs:
            return head
        packs = self._packs.get(rule_dirs, False)
        if packs is False:
            packs = self._packs[rule_dirs] = _packs_key(rule_dirs)
        return None if packs is None else f"{head}\0{packs}"

    # ------------------------------------------------------------------------------- load

    def lookup(self, path: str, need_json: bool = False) -> tuple:
        """``(key, raw, report)``: the file's key (None: not cacheable), its bytes (None: unreadable here)
        and its cached report (None: a miss)."""
        raw = read_regular(path)
        if raw is None:
            return None, None, None
        try:
            key = self.key_for(path, raw)
        except (OSError, ValueError, UnicodeError):  # ValueError: a NUL in a path; the normal path says so
            return None, raw, None
        if key is None or not self._dir_usable():
            return key, raw, None
        hit = self._load(key, path, need_json)
        if hit is not None:
            self.used.add(key)
        return key, raw, hit

    def _dir_usable(self) -> bool:
        """The directory exists, belongs to this user and no one else can write it (checked once per run)."""
        if self._usable is None:
            from meshlint.cachestore import trusted_dir

            if not os.path.isdir(self.directory):
                return False  # not yet: store() creates it, then asks again
            self._usable = trusted_dir(self.base) and trusted_dir(self.directory)
            if self._usable:
                from meshlint.cli.results_store import PackStore

                self._store = PackStore(self.directory, MAX_ENTRY_BYTES, MOST_ENTRIES, MOST_BYTES)
        return self._usable

    def _load(self, key: str, path: str, need_json: bool):
        raw = self._store.get(key)
        if raw is None:
            return None
        try:
            from meshlint import jsonfast

            doc = jsonfast.loads(raw)
            return _decode(doc, key, path, need_json)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, _Bad):
            return None  # truncated, malformed, foreign or hostile: checked again and overwritten

    # ------------------------------------------------------------------------------- store

    def store(self, key: str, report, fail_on: str, piece: dict | None = None) -> None:
        """Keep ``report`` (and ``piece``, its JSON report entry) under ``key``; silently nothing on failure."""
        if self._failed or not getattr(report, "cacheable", False) or report.diff is not None or report.diff_note:
            return
        try:
            doc = _encode(key, report, fail_on, piece)
            from meshlint import jsonfast

            text = jsonfast.dumps_compact(doc)  # json.dumps(doc, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        except (_Bad, ValueError, TypeError, RecursionError):
            return  # something JSON cannot hold exactly (NaN, an integer past 4,300 digits): not cached
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > MAX_ENTRY_BYTES:
            return
        try:
            if self._store is None and not os.path.isdir(self.directory):  # once known usable, it exists
                from meshlint.cachestore import trusted_dir

                os.makedirs(self.base, mode=0o700, exist_ok=True)
                if not trusted_dir(self.base):
                    self._failed = True
                    return  # a directory others can write: nothing of ours goes in it
                os.mkdir(self.directory, 0o700)
            if not self._dir_usable():
                return  # a directory others can write: never read, so never written either
            self._store.put(key, data)
            self.stored += 1
            self.used.add(key)
        except (OSError, ValueError):
            self._failed = True  # a read-only or full disk: the cache is only an optimisation; stop trying

    def close(self) -> None:
        """Publish this run's entries, the cache kept within its bounds, sized to this run's files (a monorepo's
        10,000 configs stay cached for its next run; entries this run used go last)."""
        if self._store is None:
            return
        used = len(self.used)
        try:
            self._store.close(self.used, keep=min(used + PRUNE_TO, MOST_ENTRIES),
                              limit=min(max(MAX_ENTRIES, 2 * used), MOST_ENTRIES))
        except OSError:
            pass


def _settings_key(settings) -> str:
    """The command-line settings, as text: every field of CliSettings (all of them can change a result)."""
    if settings is None or settings == type(settings)():
        return "defaults"  # the plain `meshlint check PATH...` and the same through click share entries
    return repr(tuple(settings))


def _packs_key(rule_dirs: tuple) -> str | None:
    """The bytes of every *.toml (rules and models.toml) in each rule pack, as the rule loader reads them."""
    parts = []
    for directory in rule_dirs:
        directory = os.fspath(directory)
        try:
            if not os.path.isdir(directory):
                return None
            names = sorted(n for n in os.listdir(directory) if n.endswith(".toml"))
        except (OSError, ValueError):
            return None
        parts.append(f"pack {os.path.abspath(directory)}")
        for name in names:
            data = read_regular(os.path.join(directory, name))
            if data is None:
                return None
            parts.append(f"{name} {_digest(data)}")
    return "\0".join(parts)


# ----------------------------------------------------------------------------------- encoding

class _Bad(Exception):
    """A value that cannot be stored, or an entry meshlint did not write."""


def _encode(key: str, report, fail_on: str, piece: dict | None) -> dict:
    error = report.error
    if piece is not None:  # the findings are stored once, as findings: the JSON entry is rebuilt from them
        piece = dict(piece, findings=None, suppressed=None)
    return {
        "format": FORMAT, "meshlint": __version__, "key": key, "path": report.path, "fail_on": fail_on,
        "status": report.status, "dialect": report.dialect, "note": report.note,
        "error": None if error is None else [error.code, error.message, error.line, error.col, error.help],
        "findings": [_finding_out(f) for f in report.findings],
        "suppressed": [_finding_out(f) for f in report.suppressed],
        "json": piece,
    }


def _finding_out(f) -> list:
    out = list(f)
    _finding_in(out)  # the same check as on load: a finding that would not load is not stored
    return out


def _decode(doc, key: str, path: str, need_json: bool):
    from meshlint.engine.filereport import FileReport
    from meshlint.errors import INPUT_ERRORS, InputError

    if doc.__class__ is not dict or doc.get("format") != FORMAT or doc.get("key") != key or doc.get("path") != path:
        raise _Bad("not this entry")
    status, dialect, note, fail_on = doc["status"], doc["dialect"], doc["note"], doc["fail_on"]
    if status not in STATUSES or fail_on not in FAIL_ON or not _opt_str(dialect) or not _opt_str(note):
        raise _Bad("fields")
    error = doc["error"]
    if error is not None:
        code, message, line, col, help_text = _want(error, list, 5)
        if code not in INPUT_ERRORS or message.__class__ is not str or not _int(line) or not _int(col) \
                or not _opt_str(help_text):
            raise _Bad("error")
        error = InputError(code, message, line, col, help_text)
    piece = doc["json"]
    if piece is not None and (piece.__class__ is not dict or piece.get("path") != path
                              or piece.get("status") != status or "findings" not in piece
                              or "suppressed" not in piece):
        raise _Bad("json entry")
    if need_json and piece is None and status == "checked":
        return None  # an entry written by a text run: the JSON report needs more (checked again, then stored)
    report = FileReport(path, status, dialect=dialect, note=note, error=error)
    report.findings = [_finding_in(f) for f in _want(doc["findings"], list)]
    report.suppressed = [_finding_in(f) for f in _want(doc["suppressed"], list)]
    report.fail_on = fail_on
    report.cached_json = piece
    return report


def _finding_in(item):
    from meshlint.engine.findings import Finding

    code, name, severity, message, help_text, key, line, col, file, skip = _want(item, list, 10)
    if code.__class__ is not str or name.__class__ is not str or severity not in SEVERITIES \
            or message.__class__ is not str or not _opt_str(help_text) or not _opt_str(key) \
            or not _int(line) or not _int(col) or not _opt_str(file) or skip.__class__ is not bool:
        raise _Bad("finding")
    return Finding(code, name, severity, message, help_text, key, line, col, file, skip)


def _want(value, kind: type, length: int | None = None):
    if value.__class__ is not kind or (length is not None and len(value) != length):
        raise _Bad("shape")
    return value


def _opt_str(value) -> bool:
    return value is None or value.__class__ is str


def _int(value) -> bool:
    return value.__class__ is int and -(1 << 62) < value < (1 << 62)
