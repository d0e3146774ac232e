"""Reading files: positions of keys, and every way a file can be unreadable."""

from __future__ import annotations

import pytest

from meshlint.errors import InputError
from meshlint.inputs.source import parse_source, read_source, split_key
from meshlint.inputs.tomlpos import scan

DOC = '''# header
[model]
dim = 4096   # comment
"quoted key" = 1
text = """multi
line = 3
"""

[distributed]
tp = 4
a.b = [1,
  { x = 1 },  # inside
]

[[mesh.dims]]
name = "pp"

[[mesh.dims]]
name = 'tp'
size = 8
'''


def test_positions_of_keys_tables_and_comments():
    pos = scan(DOC)
    assert pos.keys[("model", "dim")] == (3, 1)
    assert pos.keys[("model", "quoted key")] == (4, 1)
    assert ("model", "line") not in pos.keys  # inside a multi-line string
    assert pos.keys[("distributed", "tp")] == (10, 1)
    assert pos.keys[("distributed", "a", "b", 1, "x")] == (12, 5)
    assert pos.keys[("mesh", "dims", 1, "size")] == (20, 1)
    assert pos.tables[("distributed",)] == (9, 1)
    assert [c[2] for c in pos.comments] == [" header", " comment", " inside"]


def test_locate_falls_back_to_the_section_header_then_line_one():
    pos = scan(DOC)
    assert pos.locate(("distributed", "pp")) == ((9, 1), False)
    assert pos.locate(("parallelism", "tp")) == ((1, 1), False)
    assert pos.locate(("distributed", "tp")) == ((10, 1), True)


def test_crlf_and_tabs():
    pos = scan("[distributed]\r\n\ttp = 4\r\npp=2\r\n")
    assert pos.keys[("distributed", "tp")] == (2, 2)
    assert pos.keys[("distributed", "pp")] == (3, 1)


def test_split_key():
    assert split_key("mesh.dims[1].size") == ("mesh", "dims", 1, "size")
    assert split_key("distributed.tp") == ("distributed", "tp")


@pytest.mark.parametrize("raw, code, line, fragment", [
    (b"[d]\ntp = 1\ntp = 2\n", "ML003", 3, "duplicate key 'd.tp' (first defined on line 2)"),
    (b"[a]\nx=1\n[a]\n", "ML003", 3, "Cannot declare"),
    (b"[distributed\ntp = 1\n", "ML003", 1, "invalid TOML"),
    (b"tp = \n", "ML003", 1, "invalid TOML"),
    (b"\xef\xbb\xbf[distributed]\n", "ML002", 1, "byte-order mark"),
    (b"[distributed]\ntp = 4\x00\n", "ML002", 2, "binary file"),
    (b"[model]\nname = \"caf\xe9\"\n", "ML002", 2, "not UTF-8 text (invalid byte 0xe9"),
])
def test_unreadable_content(raw, code, line, fragment):
    with pytest.raises(InputError) as info:
        parse_source("x.toml", raw)
    assert info.value.code == code
    assert info.value.line == line
    assert fragment in info.value.message


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_source(str(tmp_path / "nope.toml"))
    with pytest.raises(InputError, match="is a directory"):
        read_source(str(tmp_path))


def test_fast_comment_scan_agrees_with_the_full_scanner():
    from conftest import FIXTURES

    from meshlint.inputs.tomlpos import scan_comments

    tricky = ('a = "x # not a comment"  # yes\nb = \'# no\'\nc = """\n# no\n"""  # yes\n'
              'd = \'\'\'# no\n\'\'\'\ne = """ends with a quote""""  # yes\n# last')
    texts = [DOC, tricky] + [p.read_text() for p in FIXTURES.rglob("*.toml")]
    for text in texts:
        assert scan_comments(text) == scan(text).comments
