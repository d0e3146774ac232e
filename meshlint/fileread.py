"""Bounded reads of an open file: the one loop the config reader and the results cache share.

Kept free of imports beyond ``os`` and ``stat`` because the results cache reads through it on the start-up path.
"""

from __future__ import annotations

import os
import stat

_O_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def read_upto(fd: int, limit: int, expected: int = -1) -> bytes:
    """At most ``limit + 1`` bytes of ``fd``: more than ``limit`` means the file is (or grew) too large.

    ``expected`` (the size ``fstat`` gave): the first read asks for one byte more than that (not ``limit + 1``:
    a buffer that large costs the system a mapping of its own for every small file), and once it returns exactly
    that many bytes, the read that would only say end-of-file is spared (the usual case).
    """
    chunks, size = [], 0
    first = expected + 1 if 0 <= expected <= limit else limit + 1
    while size <= limit:
        chunk = os.read(fd, first if not chunks else limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size == expected and len(chunks) == 1:
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_regular(path: str, limit: int) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes, or None (anything else takes the normal path,
    which says what is wrong): a FIFO or device is never opened for reading, and the open cannot block."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        fd = os.open(path, _O_READ)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        raw = read_upto(fd, limit, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if len(raw) > limit else raw
