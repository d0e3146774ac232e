"""The built-in rules parsed ahead of time (meshlint/engine/rules_prebuilt.py): current, identical to parsing, never stale."""

from __future__ import annotations

import marshal
import shutil

import pytest
from conftest import ROOT

from meshlint.engine import prebuilt, rule_cache, rules, ruleset
from meshlint.engine.expr import Template
from meshlint.generate import rules_prebuilt as generate


def _encoded(rule_list):
    return [rule_cache._encode_rule(r) for r in rule_list]


def test_the_prebuilt_module_is_current():
    # regenerated from rules/*.toml and the loader as they are now: a rule edited without
    # `python -m meshlint.generate.rules_prebuilt` fails here (and, at run time, is parsed instead)
    assert generate.OUT.read_text(encoding="utf-8") == generate.module_source(str(ROOT / "rules")), \
        "meshlint/engine/rules_prebuilt.py is stale: run python -m meshlint.generate.rules_prebuilt"


def test_the_record_module_is_current():
    assert generate.OUT_RECORD.read_text(encoding="utf-8") == generate.record_source(str(ROOT / "rules")), \
        "meshlint/engine/rules_prebuilt_record.py is stale: run python -m meshlint.generate.rules_prebuilt"


def _wheel_install(tmp_path, monkeypatch, lines=None, extra_rule=False):
    """meshlint's rules laid out as a wheel installs them (meshlint/_rules) with pip's RECORD beside the package,
    which holds ``lines`` (the generated RECORD_LINES when None); meshlint.installed pointed at it."""
    from meshlint import __version__, installed
    from meshlint.engine import rules_prebuilt_record as made

    package = tmp_path / "site-packages" / "meshlint"
    shutil.copytree(ROOT / "rules", package / "_rules")
    if extra_rule:
        (package / "_rules" / "ML999-mine.toml").write_text("code = 'ML999'\n")
    dist = package.parent / f"meshlint-{__version__}.dist-info"
    dist.mkdir()
    record = [b"meshlint/__init__.py,sha256=AAAA,121", *(made.RECORD_LINES if lines is None else lines)]
    (dist / "RECORD").write_bytes(b"\r\n".join(record) + b"\r\n")  # as pip writes it (csv)
    monkeypatch.setattr(installed, "PACKAGE", str(package))
    monkeypatch.setattr(installed, "_MEMO", [])
    return str(package / "_rules")


def test_an_installed_wheels_rules_are_current_by_its_record(tmp_path, monkeypatch):
    # RECORD holds each rule file's and builder's content (SHA-256 and size) as pip installed it: no file is read
    directory = _wheel_install(tmp_path, monkeypatch)
    monkeypatch.setattr(prebuilt, "fingerprint", lambda *a: pytest.fail("a rule file was read"))
    built = prebuilt.load(directory)
    assert built is not None and prebuilt.current_by_record(directory, prebuilt._module())
    assert [r.path for r in built] == [f"{directory}/{name}" for name in prebuilt.rule_files(directory)]


@pytest.mark.parametrize("change", ["a rule's hash", "a builder's size", "a line missing", "a rule file added"])
def test_a_record_that_differs_means_the_files_are_read(tmp_path, monkeypatch, change):
    from meshlint.engine import rules_prebuilt_record as made

    lines = list(made.RECORD_LINES)
    if change == "a rule's hash":
        lines[0] = lines[0].replace(b"sha256=", b"sha256=X")
    elif change == "a builder's size":
        lines[-1] = lines[-1] + b"0"
    elif change == "a line missing":
        del lines[5]
    directory = _wheel_install(tmp_path, monkeypatch, lines, extra_rule=change == "a rule file added")
    assert not prebuilt.current_by_record(directory, prebuilt._module())
    read = []
    real = prebuilt.fingerprint
    monkeypatch.setattr(prebuilt, "fingerprint", lambda *a: read.append(a) or real(*a))
    built = prebuilt.load(directory)
    assert read  # the content decides: the same files load (but an added rule file is not in the module)
    assert (built is None) == (change == "a rule file added")


def test_a_checkout_is_never_current_by_a_record():
    assert not prebuilt.current_by_record(rules.builtin_rules_dir(), prebuilt._module())  # rules/, not _rules


def test_the_extra_module_is_current():
    assert generate.OUT_EXTRA.read_text(encoding="utf-8") == generate.extra_source(str(ROOT / "rules")), \
        "meshlint/engine/rules_prebuilt_extra.py is stale: run python -m meshlint.generate.rules_prebuilt"


@pytest.mark.parametrize("damage", [
    {"FINGERPRINT": ("0.0.0",)},  # generated with other rules than rules_prebuilt.py
    {"FORMAT": 5},
    {"TREES": None, "DOCS": None},
    {"DOCS": {}},  # a doc missing: read from the rule file
])
def test_without_a_usable_extra_module_docs_come_from_the_files_and_trees_from_the_sources(monkeypatch, damage):
    from meshlint.engine import rules_prebuilt_extra

    for name, value in damage.items():
        monkeypatch.setattr(rules_prebuilt_extra, name, value)
    monkeypatch.setattr(prebuilt, "_EXTRA", [])
    directory = rules.builtin_rules_dir()
    built = prebuilt.load(directory)
    parsed = [rules.load_rule_file(f"{directory}/{name}", "builtin", validate=False)
              for name in prebuilt.rule_files(directory)]
    assert _encoded(built) == _encoded(parsed)  # every doc and every tree, whatever the extra module holds


def test_a_prebuilt_doc_is_a_dict_whatever_reads_it():
    import json

    built = prebuilt.load(rules.builtin_rules_dir())
    parsed = rules.load_rule_file(built[0].path, "builtin", validate=False)
    assert isinstance(built[0].doc, dict) and built[0].doc == parsed.doc and parsed.doc == built[0].doc
    assert json.dumps(dict(built[1].doc)) == json.dumps(rules.load_rule_file(built[1].path, "builtin").doc)
    assert {**built[2].doc} == dict(built[2].doc) == built[2].doc.copy() and len(built[2].doc) > 0
    assert built[3].doc.get("fix") and "fix" in built[4].doc and list(built[5].doc)


def test_prebuilt_rules_are_the_parsed_rules():
    directory = rules.builtin_rules_dir()
    built = prebuilt.load(directory)
    assert built is not None
    parsed = [rules.load_rule_file(f"{directory}/{name}", "builtin", validate=False)
              for name in prebuilt.rule_files(directory)]
    assert _encoded(built) == _encoded(parsed)
    assert [r.path for r in built] == [r.path for r in parsed]
    assert _encoded(ruleset.load_rules()) == _encoded(built)  # what a run gets


def _templates(rule) -> list:
    return [rule.message, *([rule.key] if rule.key else []), *(t for _, t in rule.help)]


def test_split_templates_are_the_parsed_templates():
    """A prebuilt template comes split at its holes: its text joins back to the file's, and its parts (literal
    texts, holes) are what parsing that text gives, braces unescaped the same way."""
    directory = rules.builtin_rules_dir()
    built = prebuilt.load(directory)
    parsed = {r.code: r for r in (rules.load_rule_file(f"{directory}/{name}", "builtin", validate=False)
                                  for name in prebuilt.rule_files(directory))}
    seen = 0
    for rule in built:
        for ours, theirs in zip(_templates(rule), _templates(parsed[rule.code]), strict=True):
            assert ours._source is None and ours._split is not None  # nothing joined until asked
            assert ours.source == theirs.source
            assert [p if isinstance(p, str) else ("hole", p.source) for p in ours.parts] == \
                   [p if isinstance(p, str) else ("hole", p.source) for p in theirs.parts]
            seen += 1
    assert seen > 3 * len(built) // 2
    braces = Template(None, None, ("a {literal} ", ("x",), " }"))
    assert braces.source == "a {{literal}} {x} }}" and braces == Template("a {{literal}} {x} }}")


@pytest.fixture
def copy(tmp_path):
    target = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", target)
    return target


def test_an_unchanged_copy_is_used_with_its_own_paths(copy):
    built = prebuilt.load(str(copy))
    assert built is not None and all(r.path.startswith(str(copy)) for r in built)


@pytest.mark.parametrize("change", [
    lambda d: (d / "ML101-invalid-value.toml").write_text(
        (d / "ML101-invalid-value.toml").read_text().replace("severity = \"error\"", "severity = \"warning\"")),
    lambda d: (d / "ML101-invalid-value.toml").write_bytes(  # the same size, one byte changed
        (d / "ML101-invalid-value.toml").read_bytes().replace(b"error", b"errox", 1)),
    lambda d: (d / "ML999-new.toml").write_text("code = 'ML999'\n"),
    lambda d: (d / "ML101-invalid-value.toml").unlink(),
])
def test_a_changed_rule_file_is_never_answered_from_the_prebuilt_module(copy, change):
    change(copy)
    assert prebuilt.load(str(copy)) is None  # the loader parses the files instead


def test_a_changed_parser_or_version_is_never_answered_from_it(monkeypatch):
    from meshlint.engine import rules_prebuilt

    directory = rules.builtin_rules_dir()
    version, *digests = rules_prebuilt.FINGERPRINT
    assert prebuilt.load(directory) is not None
    monkeypatch.setattr(rules_prebuilt, "FINGERPRINT", (version, digests[0], digests[1] ^ 1, *digests[2:]))
    assert prebuilt.load(directory) is None
    monkeypatch.setattr(rules_prebuilt, "FINGERPRINT", ("0.0.0", *digests))
    assert prebuilt.load(directory) is None


def test_the_fingerprint_sees_a_changed_builder(tmp_path, monkeypatch):
    # the builders' digest is taken from the package's files: a parser edited since generation is a stale module
    package = tmp_path / "meshlint"
    for name in prebuilt.builder_files():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "meshlint" / name, package / name)
    directory = rules.builtin_rules_dir()
    current = prebuilt.fingerprint(directory, "1")
    monkeypatch.setattr(prebuilt, "_PACKAGE", str(package))
    same = prebuilt.fingerprint(directory, "1")
    assert same == current
    parser = package / "engine" / "expr" / "parser.py"
    parser.write_bytes(parser.read_bytes().replace(b"def ", b"def  ", 1))
    assert prebuilt.fingerprint(directory, "1")[1:3] != same[1:3]
    parser.unlink()
    assert prebuilt.fingerprint(directory, "1") is None  # unreadable: parsed as without a module


def test_text_moved_between_two_rule_files_is_a_change(copy):
    # the same bytes in all, the same file names: only the boundary moved
    first, second = sorted(copy.glob("ML10*.toml"))[:2]
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(a[:-1])
    second.write_bytes(a[-1:] + b)
    assert prebuilt.load(str(copy)) is None


def test_the_module_is_literal_data():
    # nothing in it runs: every statement assigns what ast.literal_eval reads (no call, no name, no eval)
    import ast

    from meshlint.engine import rules_prebuilt, rules_prebuilt_extra

    for out, module, names in ((generate.OUT, rules_prebuilt, ["FORMAT", "FINGERPRINT", "RULES"]),
                               (generate.OUT_EXTRA, rules_prebuilt_extra, ["FORMAT", "FINGERPRINT", "TREES", "DOCS"])):
        tree = ast.parse(out.read_text(encoding="utf-8"))
        body = [node for node in tree.body
                if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        assert [node.targets[0].id for node in body] == names
        for node in body:
            assert ast.literal_eval(node.value) == getattr(module, node.targets[0].id)
    assert all(len(marshal.loads(data)) == len(prebuilt.FIELDS) for _, data in rules_prebuilt.RULES)


def test_the_entries_follow_rules_fields():
    # _rules builds a Rule from an entry by position: FIELDS must be Rule's fields, in order
    from meshlint.engine.rules import Rule

    assert prebuilt.FIELDS == Rule._fields


@pytest.mark.parametrize("damage", [
    {"RULES": [{"check": ["expr", "not a pair"]}]},  # the old encoding
    {"RULES": (("ML101", "invalid-value"),)},  # an entry too short
    {"RULES": prebuilt.entry(rules.load_rule_file(str(ROOT / "rules" / "ML101-invalid-value.toml"), "builtin"))},
    {"RULES": ((None, "not bytes"),)},
    {"RULES": None},
    {"FORMAT": 3},
])
def test_a_damaged_module_falls_back_to_parsing(monkeypatch, damage):
    from meshlint.engine import rules_prebuilt

    for name, value in damage.items():
        monkeypatch.setattr(rules_prebuilt, name, value)
    assert prebuilt.load(rules.builtin_rules_dir()) is None
    assert len(ruleset.load_rules()) == len(prebuilt.rule_files(rules.builtin_rules_dir()))


def test_a_rule_with_other_fields_is_parsed_and_not_written(monkeypatch):
    from meshlint.engine import rules_prebuilt

    monkeypatch.setattr(prebuilt, "FIELDS", prebuilt.FIELDS[:-1])
    assert prebuilt.load(rules.builtin_rules_dir()) is None
    with pytest.raises(ValueError, match="make prebuilt.FIELDS"):
        prebuilt.entry(rules.load_rule_file(str(ROOT / "rules" / "ML101-invalid-value.toml"), "builtin"))
    assert rules_prebuilt.FORMAT == prebuilt.FORMAT


@pytest.mark.parametrize("text", ["RULES = (\n", "\0", "raise ImportError('gone')\n"])
def test_a_module_that_does_not_import_falls_back_to_parsing(tmp_path, monkeypatch, text):
    # a bad merge or a truncated file: not Python, or not importable
    import sys

    import meshlint.engine as engine

    (tmp_path / "rules_prebuilt.py").write_text(text)
    monkeypatch.delitem(sys.modules, "meshlint.engine.rules_prebuilt", raising=False)
    monkeypatch.delattr(engine, "rules_prebuilt", raising=False)
    monkeypatch.setattr(engine, "__path__", [str(tmp_path), *engine.__path__])
    assert prebuilt.load(rules.builtin_rules_dir()) is None
    assert len(ruleset.load_rules()) == len(prebuilt.rule_files(rules.builtin_rules_dir()))


@pytest.mark.parametrize("size", [0, 1, prebuilt._CHUNK - 1, prebuilt._CHUNK, prebuilt._CHUNK + 1, 3 * prebuilt._CHUNK])
@pytest.mark.parametrize("at", [True, False])  # files opened relative to the directory, or by their joined path
def test_the_digest_reads_every_byte(tmp_path, monkeypatch, size, at):
    import zlib

    monkeypatch.setattr(prebuilt, "_AT", at and prebuilt._AT)

    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    (tmp_path / "a.toml").write_bytes(data)
    (tmp_path / "b.toml").write_bytes(b"tail")
    expected = zlib.crc32(b"tail", zlib.crc32(b"b.toml", zlib.crc32(data, zlib.crc32(b"a.toml"))))
    assert prebuilt._digest(str(tmp_path), ["a.toml", "b.toml"]) == (2, expected)


def test_a_rule_whose_data_is_not_literal_is_refused_by_the_generator():
    import datetime

    rule = rules.load_rule_file(str(ROOT / "rules" / "ML101-invalid-value.toml"), "builtin")
    assert prebuilt.entry(rule)[0] == "ML101"
    with pytest.raises(ValueError, match="ML101"):
        prebuilt.entry(rule._replace(params={"since": datetime.date(2026, 1, 1)}))  # TOML has dates; JSON has not


def test_a_dialect_builds_only_its_rules_and_they_are_the_parsed_ones():
    """prebuilt.load hands out a RuleSet: a dialect's rules are built on first need, the others not at all; each is
    the very rule a full listing gives, and equal to the parsed rule file."""
    directory = rules.builtin_rules_dir()
    built = prebuilt.load(directory)
    kf = built.for_dialect("kempnerforge")
    assert kf is built.for_dialect("kempnerforge")  # one list per dialect: the engine's caches key on it
    made = [r for r in built._store.made if r is not None]
    assert len(made) == len(kf) < len(built._store.made) // 2
    parsed = {r.code: r for r in (rules.load_rule_file(f"{directory}/{name}", "builtin", validate=False)
                                  for name in prebuilt.rule_files(directory))}
    assert [r.code for r in kf] == [c for c, r in parsed.items() if r.applies_to("kempnerforge")]
    assert _encoded(kf) == _encoded(parsed[r.code] for r in kf)
    everything = list(built)
    assert len(built) == len(parsed) and all(a is b for a, b in zip(kf, (r for r in everything if r in kf)))
    assert built[0] is everything[0] and built == everything


def test_a_selection_filters_as_the_rules_are_built():
    from meshlint.engine.rulelist import RuleSet, rules_for

    built = prebuilt.load(rules.builtin_rules_dir())
    errors = built.select(lambda r: r.severity == "error")
    assert errors.for_dialect("torchtitan") == [r for r in built.for_dialect("torchtitan") if r.severity == "error"]
    narrower = errors.select(lambda r: r.code.startswith("ML1"))
    assert list(narrower) == [r for r in built if r.severity == "error" and r.code.startswith("ML1")]
    plain = RuleSet.of(list(built))
    assert plain.for_dialect("megatron") == built.for_dialect("megatron")
    assert rules_for(built, "native") is built.for_dialect("native")
    listed = list(built)
    assert rules_for(listed, "native") is listed  # a plain list's users filter it themselves


def test_a_damaged_entry_of_one_dialect_fails_when_it_is_built(monkeypatch):
    """Every entry's shape is checked when the module is loaded; what a shape cannot show surfaces when that rule
    is built (a run's check of such a file then reports meshlint's own failure, ML008)."""
    from meshlint.engine import rules_prebuilt

    entries = [marshal.loads(data) for _, data in rules_prebuilt.RULES]
    at = next(i for i, e in enumerate(entries) if e[8] == ("megatron",))
    entries[at] = entries[at][:10] + (None,) + entries[at][11:]  # its lets: not pairs
    monkeypatch.setattr(rules_prebuilt, "RULES", tuple(map(prebuilt.stored, entries)))
    built = prebuilt.load(rules.builtin_rules_dir())
    assert built is not None and built.for_dialect("kempnerforge")
    with pytest.raises(TypeError):
        built.for_dialect("megatron")


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", "a tuple of other dialects", "an entry too short"])
def test_an_entry_that_does_not_decode_fails_when_its_rule_is_built(monkeypatch, damage):
    """The module's pairs are checked when it is loaded; an entry's bytes only when its rule is built: marshal's
    own refusal, or a tuple that is not an entry of this rule's dialects, raises then (ML008 in a run)."""
    from meshlint.engine import rules_prebuilt

    entries = list(rules_prebuilt.RULES)
    at = next(i for i, (dialects, _) in enumerate(entries) if dialects == ("accelerate",))
    decoded = marshal.loads(entries[at][1])
    if damage == "a tuple of other dialects":
        damage = marshal.dumps(decoded[:8] + (("native",),) + decoded[9:])
    elif damage == "an entry too short":
        damage = marshal.dumps(decoded[:5])
    entries[at] = (("accelerate",), damage)
    monkeypatch.setattr(rules_prebuilt, "RULES", tuple(entries))
    built = prebuilt.load(rules.builtin_rules_dir())
    assert built is not None and built.for_dialect("torchtitan")
    with pytest.raises((ValueError, EOFError)):
        built.for_dialect("accelerate")


def test_an_entry_s_bytes_depend_on_the_entry_alone():
    """The module must come out the same from any process (its test compares it with a fresh generation): the
    same entry with its strings interned and shared, or fresh copies of them, is marshalled to the same bytes."""
    import sys

    rule = rules.load_rule_file(str(ROOT / "rules" / "ML101-invalid-value.toml"), "builtin")
    entry = prebuilt.entry(rule)

    def fresh(value):
        if isinstance(value, str):
            return "".join(list(value))  # a new string object, not interned
        if isinstance(value, tuple):
            return tuple(fresh(v) for v in value)
        if isinstance(value, dict):
            return {fresh(k): fresh(v) for k, v in value.items()}
        return value

    def interned(value):
        if isinstance(value, str):
            return sys.intern(value)
        if isinstance(value, tuple):
            return tuple(interned(v) for v in value)
        if isinstance(value, dict):
            return {interned(k): interned(v) for k, v in value.items()}
        return value

    shared = interned(entry)
    kept = [shared, shared[0], shared[1]]  # more references to some of its objects
    assert prebuilt.stored(fresh(entry)) == prebuilt.stored(shared) == prebuilt.stored(entry) and kept
    assert marshal.loads(prebuilt.stored(shared)[1]) == entry
