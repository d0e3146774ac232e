"""meshlint/fastre.py builds the very patterns ``re.compile`` builds, from tables that are current.

The tables (meshlint/fastre_compiled/) hold what each Python version's ``re`` compiles the check path's
patterns to; these tests compare them with this interpreter's ``re`` (and with any other supported
interpreter found on PATH), and check the fallbacks: a pattern not in a table, a damaged table.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

from meshlint import fastre
from meshlint.generate import fastre_compiled as gen

SAMPLES = ["", "a", "train_32gpus.toml", "4 nodes x 8", "--nproc_per_node=8 --nnodes 2", "torchrun train.py",
           "python3 scripts/train.py --model.dim=4096", "self.tp and self.dp_shard", "meshlint: world_size=8",
           "# a comment \"quoted\" 'x'", "[a.b] x = \"\\\"\"", "é\u202e\x1b[0m\n\t", "--distributed.tp 4",
           "key.sub[3].x", "{self.tp!r} of {n}", "GPU 8GPUS 2 hosts by 4", "ignore[ML101, ML2] ignore-file"]


def _table():
    name = fastre.table_module()
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(f"no precompiled table for {sys.implementation.cache_tag}")


def test_every_literal_pattern_of_the_source_is_in_this_interpreter_s_table():
    table = _table()
    assert table.MAGIC == fastre._sre.MAGIC
    missing = [p for p in gen.patterns() if p not in table.PATTERNS]
    assert missing == [], "run python -m meshlint.generate.fastre_compiled"
    assert len(table.PATTERNS) >= 20  # the check path's patterns were found (topology, KempnerForge, tomlpos, ...)


def test_the_table_is_what_this_interpreter_s_re_compiles_now():
    table = _table()
    fresh = gen.compile_with(sys.executable, sorted(table.PATTERNS))
    assert (fresh["magic"], fresh["codesize"]) == (table.MAGIC, table.CODESIZE)
    for pattern, flags, final, code, groups, groupindex, indexgroup in fresh["patterns"]:
        assert table.PATTERNS[(pattern, flags)] == (final, tuple(code), groups, groupindex, tuple(indexgroup)), pattern


@pytest.mark.parametrize("key", sorted(gen.patterns()))
def test_a_precompiled_pattern_is_the_pattern_re_compiles(key):
    pattern, flags = key
    ours, theirs = fastre._precompiled(pattern, flags), re.compile(pattern, flags)
    if fastre._table():  # an interpreter with a table builds it from the table, not by re
        assert ours is not None
    ours = ours or fastre.compile(pattern, flags)
    assert (ours.pattern, ours.flags, ours.groups, dict(ours.groupindex)) == \
           (theirs.pattern, theirs.flags, theirs.groups, dict(theirs.groupindex))
    for text in SAMPLES:
        assert [m.span() for m in ours.finditer(text)] == [m.span() for m in theirs.finditer(text)]
        assert ours.findall(text) == theirs.findall(text)
        assert bool(ours.match(text)) == bool(theirs.match(text))


def test_a_pattern_not_in_the_table_is_compiled_by_re():
    pattern = r"(?P<word>[a-z]+)-not-in-any-table"
    got = fastre.compile(pattern, fastre.I)
    assert got.groupindex["word"] == 1 and got.match("ABC-not-in-any-table")
    assert fastre.compile(pattern, fastre.I) is got  # compiled once


def test_a_damaged_table_entry_falls_back_to_re(monkeypatch):
    pattern, flags = gen.patterns()[0]
    final, code, groups, groupindex, indexgroup = _table().PATTERNS[(pattern, flags)]
    damaged = {(pattern, flags): (final, (99999,) + tuple(code[1:]), groups, groupindex, indexgroup)}
    monkeypatch.setattr(fastre, "_TABLE", [damaged])
    monkeypatch.setattr(fastre, "_COMPILED", {})
    assert fastre._precompiled(pattern, flags) is None  # _sre refuses the code
    assert fastre.compile(pattern, flags).pattern == re.compile(pattern, flags).pattern


def test_an_interpreter_without_a_table_uses_re(monkeypatch):
    monkeypatch.setattr(fastre, "_TABLE", [])
    monkeypatch.setattr(fastre, "_COMPILED", {})
    monkeypatch.setattr(fastre, "table_module", lambda: "meshlint.fastre_compiled.no_such_python")
    pattern, flags = gen.patterns()[0]
    assert fastre._table() == {} and fastre._precompiled(pattern, flags) is None
    assert fastre.compile(pattern, flags).pattern == pattern


def test_the_generator_finds_patterns_written_as_constants_and_with_flags(tmp_path):
    (tmp_path / "m.py").write_text('from meshlint import fastre\nPAT = r"a+b"\n'
                                   'x = fastre.compile(PAT, fastre.S)\ny = fastre.compile("c", fastre.I | fastre.M)\n'
                                   'z = fastre.compile(f"{PAT}")\n')
    assert gen.patterns(tmp_path) == [("a+b", fastre.S), ("c", fastre.I | fastre.M)]


def _other_interpreters() -> list:
    out = []
    for python in gen.interpreters()[1:]:
        try:
            subprocess.run([python, "-c", "pass"], capture_output=True, check=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        out.append(python)
    return out


def test_the_tables_of_the_other_interpreters_found_here_are_current():
    others = _other_interpreters()
    if not others:
        pytest.skip("no other supported Python on PATH")
    pats = gen.patterns()
    for python in others:
        fresh = gen.compile_with(python, pats)
        path = gen.OUT_DIR / f"{gen.module_name(fresh['tag'])}.py"
        assert path.read_text(encoding="utf-8") == gen.render(fresh), f"{path} is stale"
