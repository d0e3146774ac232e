"""Where the results cache keeps its entries: a few pack files and one index, not a file per config.

A first run checks every config and stores every result. Creating a file costs the system far more
than writing into one already open (tens to hundreds of microseconds each on a journalled disk,
more right after files were deleted): a file per entry made a cold check of 30 configs spend more
of its time in the kernel than in meshlint. Here a run appends the entries it stores to one new
pack file, and when it ends publishes them in the index; two files for a run, however many configs.

``index``: a header, then one fixed-width record per entry, sorted by key (a lookup is a binary
search in the bytes, nothing decoded): the key's 32 bytes, the pack's 8-byte id, the entry's
offset and length in that pack, and the generation that last stored or used it (the recency the
bounds prune by). ``<id>.pack``: entries, each the JSON text results_cache writes, back to back.

Every file is written whole or not at all: a pack goes to a private temporary file renamed into
place before any index names it; the index is rewritten the same way. Two runs ending at once
each write their own index from the one they found: the later rename wins, and the other's entries
are simply not found (a cache miss, never a wrong result). What is read is trusted only as the
cache's other files are (cachestore: owned by this user, writable by no one else, not a link), and
an entry is used only if it decodes to the very key asked for (results_cache._decode): a damaged
index or pack is a miss.
"""

from __future__ import annotations

import os
import time

INDEX = "index"
MAGIC = b"meshlint results index 1\n"
HEAD = len(MAGIC) + 8             # then the generation and the number of records, 4 bytes each
RECORD = 32 + 8 + 4 + 4 + 4       # key, pack id, offset, length, generation
STALE_SECONDS = 3600              # a pack no index names (a run still writing, or killed) is left this long
MAX_PACKS = 32                    # past this many packs, or twice the live bytes, the live entries are repacked


class PackStore:
    """The entries of one cache directory, for one run: ``get`` by key, ``put`` new ones, ``close`` publishes."""

    def __init__(self, directory: str, entry_limit: int, most_entries: int, most_bytes: int):
        self.directory = directory
        self.entry_limit = entry_limit
        self.most_bytes = most_bytes
        self.index_limit = HEAD + RECORD * most_entries
        self._index: bytes | None = None   # as read at the first lookup (b"": none usable)
        self._packs: dict = {}             # pack id -> an open file descriptor (None: unusable)
        self._new: dict = {}               # key bytes -> (offset, length) in the pack this run writes
        self._pack: _Pack | None = None     # the pack this run writes, from its first entry

    # ------------------------------------------------------------------------------- reading

    def get(self, key: str) -> bytes | None:
        """The entry stored under ``key`` (64 hex digits), or None."""
        digest = bytes.fromhex(key)
        index = self._read_index() if self._index is None else self._index
        at = _find(index, digest)
        if at < 0:
            return None
        pack, offset, length, _ = _record(index, at)
        return self._entry(pack, offset, length) if length <= self.entry_limit else None

    def _read_index(self) -> bytes:
        from meshlint.cachestore import read_private

        raw = read_private(os.path.join(self.directory, INDEX), self.index_limit)
        self._index = raw if raw is not None and _valid(raw) else b""
        return self._index

    # ------------------------------------------------------------------------------- writing

    def put(self, key: str, data: bytes) -> None:
        """Append an entry to this run's pack (created at the first); raises OSError. Published by ``close``."""
        if self._pack is None:
            self._pack = _Pack(self.directory)
        if self._pack.size + len(data) > self.most_bytes:
            return
        self._new[bytes.fromhex(key)] = (self._pack.size, len(data))
        self._pack.append(data)

    def close(self, used: set, keep: int, limit: int) -> None:
        """Publish this run's entries: its pack renamed into place, then the index rewritten with them, the
        entries ``used`` (keys this run read or wrote) marked newest, and past ``limit`` entries only the
        newest ``keep`` (and at most ``most_bytes``) kept. Packs no index names any more are deleted."""
        self._close_packs()
        pack, self._pack = self._pack, None
        if pack is None:
            return
        pack.publish(keep=bool(self._new))
        if not self._new:
            return
        found = self._read_index()  # as it is now: another run may have published since this one began
        generation = (int.from_bytes(found[HEAD - 8:HEAD - 4], "little") + 1) if found else 1
        records = _records(found)
        published = {p for p, _, _, _ in records.values()} | {pack.id}
        marked = {bytes.fromhex(k) for k in used}
        for digest in marked.intersection(records):
            records[digest] = records[digest][:3] + (generation,)
        for digest, (offset, length) in self._new.items():
            records[digest] = (pack.id, offset, length, generation)
        if len(records) > limit:
            records = _newest(records, marked, keep, self.most_bytes)
        records = self._repacked(records)
        write_index(self.directory, records, generation)
        self._collect({p for p, _, _, _ in records.values()}, published)

    def _close_packs(self) -> None:
        for fd in self._packs.values():
            if fd is not None:
                os.close(fd)
        self._packs.clear()

    def _repacked(self, records: dict) -> dict:
        """The live entries copied into one new pack when the packs hold more than twice their bytes (or are
        too many): a cache of 10,000 configs edited a few at a time stays about the size of its entries."""
        live = sum(length for _, _, length, _ in records.values())
        packs = {pack for pack, _, _, _ in records.values()}
        held = 0
        for pack in packs:
            try:
                held += os.stat(os.path.join(self.directory, pack.hex() + ".pack")).st_size
            except OSError:
                pass
        if len(packs) <= MAX_PACKS and held <= 2 * live + (1 << 20):
            return records
        new = _Pack(self.directory)
        out: dict = {}
        try:
            for digest, (pack, offset, length, gen) in sorted(records.items(), key=lambda kv: (kv[1][0], kv[1][1])):
                data = self._entry(pack, offset, length)
                if data is not None:  # unreadable now: dropped (a miss next time)
                    out[digest] = (new.id, new.size, length, gen)
                    new.append(data)  # one entry in memory at a time, however large the cache
        finally:
            self._close_packs()
        new.publish()
        return out

    def _entry(self, pack: bytes, offset: int, length: int) -> bytes | None:
        fd = self._packs.get(pack, -1)
        if fd == -1:
            fd = self._packs[pack] = _open_private(os.path.join(self.directory, pack.hex() + ".pack"), self.most_bytes)
        if fd is None:
            return None
        try:
            data = os.pread(fd, length, offset)
        except OSError:
            return None
        return data if len(data) == length else None

    def _collect(self, live: set, published: set) -> None:
        """Delete the packs the new index no longer names: at once those the index named before (this cache's own),
        after STALE_SECONDS any other (a run may still be writing it); and entries of older formats (``*.json``)."""
        old = time.time() - STALE_SECONDS
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            full = os.path.join(self.directory, name)
            if name.endswith(".pack"):
                try:
                    pack = bytes.fromhex(name[:-5])
                except ValueError:
                    continue
                if pack in live:
                    continue
                if pack in published or _older(full, old):
                    _unlink(full)
            elif name.endswith(".tmp") and _older(full, old):
                _unlink(full)
            elif name.endswith(".json") and len(name) == 69:  # an entry file of format 3 and before
                _unlink(full)


_WRITE_AT = 1 << 16


class _Pack:
    """A pack being written: entries appended to a private temporary file, renamed into place by ``publish``."""

    def __init__(self, directory: str):
        self.id = os.urandom(8)
        self.final = os.path.join(directory, self.id.hex() + ".pack")
        self.tmp = f"{self.final}.{os.getpid()}.tmp"
        self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        self.size = 0
        self._held: list = []  # entries not written yet: one write per ~64 KB, not one per entry (a system call each)
        self._held_bytes = 0

    def append(self, data: bytes) -> None:
        self._held.append(data)
        self._held_bytes += len(data)
        self.size += len(data)
        if self._held_bytes >= _WRITE_AT:
            self._flush()

    def _flush(self) -> None:
        from meshlint.cachestore import write_all

        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held, self._held_bytes = [], 0
            write_all(self.fd, data)

    def publish(self, keep: bool = True) -> None:
        """Closed, then renamed into place (``keep``) or deleted; raises OSError, leaving no temporary file."""
        try:
            try:
                if keep:
                    self._flush()
            finally:
                os.close(self.fd)
            if keep:
                os.replace(self.tmp, self.final)
                return
        except OSError:
            _unlink(self.tmp)
            raise
        _unlink(self.tmp)


# ----------------------------------------------------------------------------------- the index's bytes

def write_index(directory: str, records: dict, generation: int) -> None:
    """The index of ``records`` (digest -> (pack id, offset, length, generation)), written whole or not at all."""
    from meshlint.cachestore import write_private

    def record(digest: bytes) -> bytes:
        pack, offset, length, gen = records[digest]
        return b"".join((digest, pack, offset.to_bytes(4, "little"), length.to_bytes(4, "little"),
                         gen.to_bytes(4, "little")))

    head = MAGIC + generation.to_bytes(4, "little") + len(records).to_bytes(4, "little")
    write_private(os.path.join(directory, INDEX), head + b"".join(map(record, sorted(records))))


def read_index(directory: str) -> dict:
    """digest -> (pack id, offset, length, generation) of the index in ``directory`` ({}: none, or not valid)."""
    try:
        with open(os.path.join(directory, INDEX), "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    return _records(raw) if _valid(raw) else {}


def _valid(raw: bytes) -> bool:
    if not raw.startswith(MAGIC) or len(raw) < HEAD:
        return False
    count = int.from_bytes(raw[HEAD - 4:HEAD], "little")
    return len(raw) == HEAD + count * RECORD


def _find(index: bytes, digest: bytes) -> int:
    """The offset of ``digest``'s record in ``index``, or -1: a binary search over the sorted records."""
    if not index:
        return -1
    lo, hi = 0, (len(index) - HEAD) // RECORD
    while lo < hi:
        mid = (lo + hi) >> 1
        at = HEAD + mid * RECORD
        key = index[at:at + 32]
        if key < digest:
            lo = mid + 1
        elif key > digest:
            hi = mid
        else:
            return at
    return -1


def _records(index: bytes) -> dict:
    """digest -> (pack id, offset, length, generation) of every record."""
    return {index[at:at + 32]: _record(index, at) for at in range(HEAD, len(index), RECORD)}


def _record(index: bytes, at: int) -> tuple:
    """(pack id, offset, length, generation) of the record at ``at``."""
    return (index[at + 32:at + 40], int.from_bytes(index[at + 40:at + 44], "little"),
            int.from_bytes(index[at + 44:at + 48], "little"), int.from_bytes(index[at + 48:at + 52], "little"))


def _newest(records: dict, used: set, keep: int, most_bytes: int) -> dict:
    """The ``keep`` newest records within ``most_bytes``: those this run used first, then by generation."""
    ranked = sorted(records.items(), key=lambda kv: (kv[0] in used, kv[1][3]), reverse=True)
    out, total = {}, 0
    for digest, record in ranked[:keep]:
        total += record[2]
        if total > most_bytes:
            break
        out[digest] = record
    return out


# ----------------------------------------------------------------------------------- files

def _open_private(path: str, limit: int) -> int | None:
    """A descriptor of ``path`` for reading where cachestore trusts it (see ``cachestore.open_private``), or None."""
    from meshlint.cachestore import open_private

    opened = open_private(path, limit)
    return None if opened is None else opened[0]


def _older(path: str, than: float) -> bool:
    try:
        return os.lstat(path).st_mtime < than
    except OSError:
        return False


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
