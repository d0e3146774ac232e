"""The fast TOML reader (meshlint/tomlfast.py) gives tomllib's table exactly, or declines.

Three proofs: every TOML file at hand (this repository, the frameworks' trees, the test
environment's site-packages), hand-written documents at each rule tomllib enforces, and
generated documents with their mutants (bytes flipped, cut short, lines duplicated, swapped or
indented). On every one: accepted means the same table as tomllib's (types, key order, float
bits), and never a document tomllib refuses. The long corpus run, with the torchtitan history,
is bench/bench_tomlfast.py.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tomlsame import same, verdict

from meshlint import tomlfast
from meshlint.inputs import tomlpos
from meshlint.inputs.tomlpos import quick_scan, scan

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ROOT.parent / "shared" / "frameworks"


def _both_ways(text: str) -> str:
    """The verdict with the reader's line caches empty, then again with them filled by the same text;
    and on a document tomllib accepts, the line-at-a-time key positions are the full scan's or None."""
    tomlfast._KEYS.clear(), tomlfast._VALUES.clear(), tomlfast._HEADERS.clear()
    first = verdict(text)
    second = verdict(text)
    assert first == second, (first, second, text)
    _same_comments(text)
    if _valid(text):
        quick = quick_scan(text)
        assert quick is None or _same_positions(quick, scan(text)), text
    return first


_COMMENTS = re.compile(tomlpos._STRINGS_OR_COMMENT_PATTERN, re.S)


def _same_comments(text: str) -> None:
    """The comments found a line at a time are the strings-or-comment pattern's (or left to it)."""
    quick = tomlpos._line_comments(text)
    assert quick is None or quick == tomlpos.comments_by(_COMMENTS, text), text


def _same_positions(a, b) -> bool:
    return (list(a.keys.items()) == list(b.keys.items()) and list(a.tables.items()) == list(b.tables.items())
            and a.comments == b.comments and a.duplicates == b.duplicates)


def _toml_files(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".frameworks", "__pycache__")]
        for name in filenames:
            if name.endswith(".toml"):
                yield Path(dirpath) / name


@pytest.mark.parametrize("where", ["repo", "frameworks", "site-packages"])
def test_every_toml_file_at_hand_reads_as_tomllib_reads_it(where):
    root = {"repo": ROOT, "frameworks": FRAMEWORKS, "site-packages": Path(sys.prefix) / "lib"}[where]
    if not root.is_dir():
        pytest.skip(f"{root} is not here")
    counts: dict = {}
    for path in _toml_files(root):
        try:
            text = path.read_bytes().decode()
        except (OSError, UnicodeDecodeError):
            continue
        result = _both_ways(text)
        assert not result.startswith("WRONG"), (path, result)
        counts[result] = counts.get(result, 0) + 1
    assert counts.get("accepted", 0) > 0, counts


def test_every_kempnerforge_and_torchtitan_config_takes_the_fast_path():
    """The configs a run reads are never left to tomllib (multi-line strings aside)."""
    texts = [p.read_bytes().decode("utf-8", "replace") for p in _toml_files(ROOT / "fixtures")
             if "kempnerforge" in p.parts or "torchtitan" in p.parts]
    texts += [p.read_text() for p in _toml_files(FRAMEWORKS / "KempnerForge-5666d0d" / "configs")]
    readable = [t for t in texts if _valid(t) and '"""' not in t and "'''" not in t]
    assert len(readable) > 30
    assert [t for t in readable if _both_ways(t) != "accepted"] == []
    assert [t for t in readable if quick_scan(t) is None] == []  # positions without the full scan


def _valid(text: str) -> bool:
    try:
        tomllib.loads(text)
    except ValueError:
        return False
    return True


ACCEPTED = [
    "",
    "a = 1\n",
    "a = 1",
    "# only a comment",
    "a = -0\nb = +7\nc = 1_000\nd = 0\n",
    "a = 1.5\nb = -0.0\nc = 1e-4\nd = 3E+2\ne = 1_0.2_5e1_0\nf = 0e0\ng = 6.02e23\n",
    "a = inf\nb = -inf\nc = +inf\nd = nan\ne = -nan\nf = +nan\n",
    "a = true\nb = false\n",
    'a = "x # not a comment"  # a comment\nb = \'C:\\path\'\n',
    'a = "tab\\there \\"q\\" \\\\ \\b\\f\\n\\r"\n',
    'a = ""\nb = \'\'\n"" = 3\n',
    "a = [1, 2, 3]\nb = []\nc = [ ]\nd = [1,]\ne = [[1, 2], ['x'], []]\n",
    "a = [\n  1,  # one\n  2,\n  # nothing\n]\n",
    "a = { x = 1, y = 'z', z = [1, {w = 2}] }\nb = {}\n",
    "[t]\na = 1\n[u.v]\nb = 2\n[t.w]\nc = 3\n",
    "[a.b]\nx = 1\n[a]\ny = 2\n",
    "a.b.c = 1\na.b.d = 2\na.e = 3\n",
    "[t]\na.b = 1\n[t.c]\nd = 1\n",
    "[[a]]\nx = 1\n[[a]]\nx = 2\n[a.b]\ny = 1\n[[a]]\n[a.b]\ny = 2\n",
    "[[a.b]]\n[[a.b]]\n[a]\nc = 1\n",
    "[ 'q k' . \"r.s\" ]\n\"t u\" = 1\n'v' . w = 2\n",
    "  a = 1  \n\t[ t ]  # c\n\tb = 2\n",
    "a=1\nb =2\nc= 3\n",
    "a = 1\r\nb = 2\r\n",
    "k = \"é ☃ \U0001f600\"  # ünïcode\n",
    "n = 123456789012345678901234567890\n",
    "1 = 1\n-a = 2\n_ = 3\n2.3 = 4\n",
]

REFUSED_OR_DECLINED = [
    "a = 1\na = 2\n", "[t]\n[t]\n", "a = 1\n[a]\n", "a = {}\n[a]\n", "a = [1]\n[[a]]\n", "a.b = 1\n[a]\n",
    "[t]\na.b = 1\n[t.a]\n", "a = {x = 1}\na.y = 2\n", "a = 1\na.b = 2\n", "[[a]]\n[a]\n", "a = [1,,2]\n",
    "a = [,]\n", "a = {x = 1,}\n", "a = {x = 1, x = 2}\n", "a = {\nx = 1}\n", "a = 01\n", "a = 1__0\n", "a = _1\n",
    "a = 1_\n", "a = 1.\n", "a = .5\n", "a = 1e\n", "a = 1.e5\n", "a = 0x1F\n", "a = 0o7\n", "a = 0b1\n",
    "a = 1979-05-27\n", "a = 07:32:00\n", "a = 1979-05-27T07:32:00Z\n", "a = truex\n", "a = True\n", "a = \"x\n",
    "a = 'x\n", 'a = "\\x"\n', 'a = "\\u00e9"\n', "a = \"\"\"x\"\"\"\n", "a = '''x'''\n", "a = 1 b = 2\n",
    "a = 1,\n", "a\n", "= 1\n", "a = \n", "[t\n", "[[t]\n", "[ [t]]\n", "[t] x\n", "a = 1\rb = 2\n",
    "a = \"\x01\"\n", "# \x7f\n", "a = 1 # \x00\n", "a b = 1\n", "ä = 1\n", "a = ä\n", "\ufeffa = 1\n",
    "a = [1\n", "a = {x = 1\n", "a. = 1\n", ".a = 1\n", "a..b = 1\n", "[]\n", "[[]]\n", "a = -\n", "a = +\n",
    "a = 1" + "0" * 5000 + "\n", "a = inf1\n", "a = -inf.0\n",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_documents_it_reads_are_tomllib_s_tables(text):
    assert _both_ways(text) == "accepted", text


@pytest.mark.parametrize("text", REFUSED_OR_DECLINED)
def test_documents_tomllib_refuses_or_it_leaves_to_tomllib(text):
    assert tomlfast.loads(text) is None or _both_ways(text) == "accepted", text
    assert not _both_ways(text).startswith("WRONG"), text


def test_a_declined_document_is_read_and_worded_by_tomllib():
    from meshlint.errors import InputError
    from meshlint.inputs.source import parse_toml

    assert parse_toml('a = """x\ny"""\n') == {"a": "x\ny"}
    with pytest.raises(InputError) as exc:
        parse_toml("a = 1\na = 2\n")
    assert exc.value.line == 2


# ------------------------------------------------------------------------------------------ generated

_BARE = st.text("abcxyzABZ019_-", min_size=1, max_size=6)
_KEY = st.one_of(_BARE, _BARE.map(lambda k: f'"{k}"'), _BARE.map(lambda k: f"'{k}'"),
                 st.tuples(_BARE, _BARE).map(lambda t: f"{t[0]}.{t[1]}"), st.sampled_from(['"a.b"', '"é"', '""']))
_SCALAR = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.sampled_from(["0", "-0", "+0", "1_000", "1e5", "1E-5", "-0.0", "3.14", "inf", "-nan", "+inf", "1__0", "01",
                     "1.", ".1", "0x10", "1979-05-27", "true", "false", "True", "1_", "6.0e+0_1"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(st.characters(codec="utf-8", exclude_characters="\r"), max_size=8).map(
        lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    st.text(st.characters(codec="utf-8", exclude_characters="'\n\r"), max_size=8).map(lambda t: f"'{t}'"),
    st.sampled_from(['"\\t\\n"', '"\\u0041"', "'a\\b'", '"a\\qb"', '""', "''", '"#"']),
)
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.lists(inner, max_size=3).map(lambda xs: "[\n  " + ",\n  # c\n  ".join(xs) + ",\n]"),
    st.lists(st.tuples(_BARE, inner), max_size=3).map(lambda kv: "{" + ", ".join(f"{k} = {v}" for k, v in kv) + "}"),
), max_leaves=6)
_LINE = st.one_of(
    st.tuples(_KEY, _VALUE, st.sampled_from(["", "  # note", "#", " "])).map(lambda t: f"{t[0]} = {t[1]}{t[2]}"),
    _KEY.map(lambda k: f"[{k}]"), _KEY.map(lambda k: f"[[{k}]]"), st.sampled_from(["", "# comment", "  "]),
)
_DOCUMENT = st.lists(_LINE, max_size=12).map("\n".join)
_NOISE = "\"'[]{}=.,#\n\r\t 0e_-+xé\x00\\"


def _mutants(text: str, data) -> list:
    out = [text, text + "\n" + text]
    if text:
        i = data.draw(st.integers(0, len(text) - 1))
        out.append(text[:i] + data.draw(st.sampled_from(_NOISE)) + text[i + 1:])
        out.append(text[:i])
        out.append(text[:i] + data.draw(st.sampled_from(_NOISE)) + text[i:])
    lines = text.split("\n")
    if lines:
        j = data.draw(st.integers(0, len(lines) - 1))
        out.append("\n".join(lines[:j + 1] + [lines[j]] + lines[j + 1:]))
        out.append("\n".join(lines[j:] + lines[:j]))
        out.append("\n".join(lines[:j] + ["  " + lines[j]] + lines[j + 1:]))
    return out


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_DOCUMENT, st.data())
def test_generated_documents_and_their_mutants(text, data):
    for mutant in _mutants(text, data):
        result = _both_ways(mutant)
        assert not result.startswith("WRONG"), (result, mutant)


def test_the_line_caches_stay_bounded():
    tomlfast._KEYS.clear(), tomlfast._VALUES.clear(), tomlfast._HEADERS.clear()
    text = "".join(f"[t{i}]\nk{i} = {i}\n" for i in range(tomlfast._CACHED + 50))
    assert same(tomlfast.loads(text), tomllib.loads(text))
    assert max(map(len, (tomlfast._KEYS, tomlfast._VALUES, tomlfast._HEADERS))) <= tomlfast._CACHED


@pytest.mark.parametrize("text", [
    "a = 1\n[t]\nb.c = 2\n  d = [1, 2 ,  3,]\n[[x]]\ny = 1\n[[x]]\n[x.z]\nw = []\n[[x.q]]\n# c\nk = 'v' # c2\n",
    "[ a . b ]\nc = [ ]\n[a]\nd = [ 1 ]\n\t e = true\n",
])
def test_positions_line_at_a_time_are_the_full_scan_s(text):
    quick = quick_scan(text)
    assert quick is not None and _same_positions(quick, scan(text))


def test_a_line_read_before_stands_where_it_is_now():
    """quick_scan keeps what each line's text says across documents (the same ``tp = 2`` in another table, on
    another line, after a header of the same text): each document's positions are still its full scan's."""
    import meshlint.inputs.tomlpos as tomlpos

    documents = ["[a]\ntp = 2\n[[x]]\ny = [1, 2]\n", "tp = 2\n\n[b]\ntp = 2\n[[x]]\n[[x]]\ny = [1, 2]\n",
                 "[[x]]\n# c\n  y = [1, 2]\n[a]\nb.tp = 2\ntp = 2\ntp = 2\n"]
    for text in documents * 2:
        quick = quick_scan(text)
        assert quick is not None and _same_positions(quick, scan(text)), text
        assert quick.duplicates == scan(text).duplicates
    assert "tp = 2" in tomlpos._SHAPES and len(tomlpos._SHAPES) <= tomlpos._SHAPES_MAX
    assert quick_scan("a = 1\n[\"q\"]\n") is None and quick_scan("[\"q\"]\n") is None  # declined again


@pytest.mark.parametrize("text", [
    "a = {b = 1}\n", '"k" = 1\n', "a = [\n1]\n", "a = ['x,y']\n", "a = [[1]]\n", "b = 2\na = [\n1]\nc = 3\n",
    'x = 1\n[t]\n"q.r".s = [ { u = [1, {v = "w"}] }, # c\n  {u = 2}, ]  # d\n\n[[t.z]]\nk = {a.b = 1, c = [\n2, 3]}\ny = 4\n',
    "[[x]]\na = [\n  {b = 1},\n  {b = 2},\n]\n[[x]]\na = [{b = 3}]\n  'a' = 5\n",  # a duplicate key, quoted
    "a = [  # c\n  1,\n  # d\n  2\n]   # e\nb = 'q' # f\n", "  k = [\"x\", 'y'] \nl = 1\n",
])
def test_a_statement_read_where_it_stands_is_the_full_scan_s(text):
    """Quoted keys, inline tables and arrays that are not one line of plain values are read by the full scan's
    own code from where they start; every line around them, after them and between them a line at a time."""
    quick = quick_scan(text)
    assert quick is not None and _same_positions(quick, scan(text)), text


@pytest.mark.parametrize("text", ['a = """x\ny"""\n', '["q"]\nk = 1\n', "a = 1\r\n", "a = {b = 1} c = 2\n"])
def test_positions_of_other_shapes_are_left_to_the_full_scan(text):
    assert quick_scan(text) is None


def test_comments_a_line_at_a_time_on_every_text_file_here():
    """Python, shell and Markdown too: quotes, '#' in strings and unclosed quotes of every kind."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".frameworks", "__pycache__")]
        for name in filenames:
            if name.endswith((".toml", ".py", ".sh", ".md")):
                try:
                    text = (Path(dirpath) / name).read_bytes().decode()
                except (OSError, UnicodeDecodeError):
                    continue
                _same_comments(text)
                count += tomlpos._line_comments(text) is not None
    assert count > 200


@pytest.mark.parametrize("text", ['a = "x # y" # z\n', "a = 'it''s' # c\n", 'a = "q\\"#" # c\n', 'a = "open # c\n',
                                  "a = 'open # c\n", '# "\n"x" # c', "#\n#\r\n# é", 'a = "\\\\" # c'])
def test_comments_a_line_at_a_time_tricky_lines(text):
    assert tomlpos._line_comments(text) == tomlpos.comments_by(_COMMENTS, text)
