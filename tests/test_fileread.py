"""meshlint/fileread.py: a bounded read gives the file's bytes, or more than the limit when the file is (or grew) too
large, whatever size fstat said."""

from __future__ import annotations

import os

import pytest

from meshlint.fileread import read_upto


@pytest.mark.parametrize("size, expected, limit", [
    (0, 0, 10), (5, 5, 10), (10, 10, 10),  # as fstat said
    (8, 5, 10),                            # grew after fstat, still within the limit
    (3, 5, 10),                            # shrank after fstat
    (11, 11, 10), (50, 5, 10),             # too large (or grew past the limit): more than the limit comes back
    (7, -1, 10), (30, -1, 10),             # no size given
])
def test_a_bounded_read(tmp_path, size, expected, limit):
    path = tmp_path / "f"
    path.write_bytes(bytes(range(size)))
    fd = os.open(path, os.O_RDONLY)
    try:
        got = read_upto(fd, limit, expected)
    finally:
        os.close(fd)
    want = bytes(range(size))
    assert got == want if size <= limit else (len(got) == limit + 1 and want.startswith(got))
