"""Bounded reads of an open file: the one loop the config reader and the results cache share.

Kept free of imports beyond ``os`` because the results cache reads through it on the start-up path.
"""

from __future__ import annotations

import os


def read_upto(fd: int, limit: int, expected: int = -1) -> bytes:
    """At most ``limit + 1`` bytes of ``fd``: more than ``limit`` means the file is (or grew) too large.

    ``expected`` (the size ``fstat`` gave): once a first read returns exactly that many bytes, the read that
    would only say end-of-file is spared (the usual case).
    """
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size == expected and len(chunks) == 1:
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
