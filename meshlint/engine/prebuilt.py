"""The built-in rules parsed ahead of time (meshlint/engine/rules_prebuilt.py), used only while they match the rule files.

Parsing the built-in rule files (TOML, then every expression) costs a first run, with no rule cache
yet, about as much as checking 30 configs. ``python -m meshlint.generate.rules_prebuilt`` writes the
parsed rules into the package as data made for loading: one tuple per rule, in Rule's field order
(``entry``), of strings, tuples and the rule's own params, all of it what ``ast.literal_eval`` reads, so
the module holds data, never code. ``_rules`` builds the rules back in one pass, without the rule cache's
per-field checks (which guard a cache directory others might write, not the package's own module). A template
is stored split at its holes (no run scans its text for them); an expression is its source. What no check
reads is in rules_prebuilt_extra.py beside it (``extra``): each rule's doc, read when something first reads it
(``_Doc``), and each expression's tree as JSON text, rebuilt from the parser's node types only when the
expression is first interpreted (``tree_of``, ``treecode.decode_tree``), as from the rule cache.

The module is used only while its fingerprint matches what it was made from: meshlint's version and a
CRC-32 over the rule files' names and contents, and another over the modules that parse, encode and build
rules (``_digest``). At run time the fingerprint is taken again from the files themselves (no mtime, so
it holds in a wheel too, where the rules are ``meshlint/_rules``); anything that differs, a rule file
added, removed or edited, or a changed parser, means the prebuilt module is not used and the rules are
parsed as before (the rule cache, then the files), as when the module is damaged or does not import.
Where pip installed meshlint from a wheel, the same content is known without reading it: pip's RECORD lists
each installed file's SHA-256 and size, and rules_prebuilt_record.py each rule file's and builder's line as the
generator computed it; every line there, and the same rule files, mean the module is current
(``current_by_record``, meshlint/installed.py). tests/test_rules_prebuilt.py regenerates the modules and fails
when one is stale.

Beside it, meshlint/engine/rules_compiled/ holds the same rules' expressions compiled to Python
functions (meshlint/engine/expr/compiler.py), with the same fingerprint in its index and in each of its
modules: they are installed only together with a current prebuilt module, so a compiled function never
stands in for an expression that has changed since. One module holds the expressions of the rules of
each dialect, one those of the rules of several: a run imports a dialect's when it first meets that
dialect. tests/test_expr_compiled.py checks they agree with the interpreter.
"""

from __future__ import annotations

import os
import sys
import zlib

from meshlint.lazydict import LazyDict

FORMAT = 7  # of rules_prebuilt.RULES: one (dialects, marshalled entry) pair per rule (``stored``); 6: the entries as
# literal tuples, trees and docs in rules_prebuilt_extra; 5: templates split; 3 and below: the rule cache's
# marshal's format 2 for data (str, bytes, int, float, bool, None, tuple, list, dict), read by every Python 3: the
# bytes depend on the entry alone (formats 3 and 4 mark objects shared and strings interned in the writing process)
MARSHAL_VERSION = 2

# Rule's fields, in the order an entry holds them: ``_rules`` builds a Rule from them by position, so a Rule
# with other fields is parsed from the rule files (and the generator refuses) until this line follows it
FIELDS = ("code", "name", "severity", "summary", "check", "message", "path", "origin", "dialects", "params", "lets",
          "foreach", "when", "key", "help", "doc", "frameworks", "fallback", "skip_note")


def builder_files() -> tuple:
    """The modules whose code decides what a rule file parses to and how it is stored here (relative to the
    meshlint package, "/"-separated)."""
    from meshlint.engine.expr import MODULES

    return tuple(f"engine/expr/{name}" for name in MODULES) + (
        "engine/rules.py", "engine/rule_cache.py", "engine/prebuilt.py", "cachestore.py", "limits.py",
        "frameworks/versions.py", "frameworks/registry.py")


def rule_files(directory: str) -> list:
    """The built-in rule files' names, as ``rules._load_dir`` reads them."""
    return sorted(f for f in os.listdir(directory) if f.endswith(".toml") and f != "models.toml")


def fingerprint(directory: str, version: str) -> tuple | None:
    """What the parsed rules of ``directory`` depend on, from the files' content; None if one is unreadable:
    meshlint's version and, for the builders and for the rule files, their number and one CRC-32 over each
    file's name and content in turn (``_digest``)."""
    try:
        return (version,) + _digest(_PACKAGE, builder_files()) + _digest(directory, rule_files(directory))
    except OSError:
        return None


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the meshlint package: the builders' root
_CHUNK = 1 << 16  # larger than any rule file or builder: one read each
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_AT = os.open in os.supports_dir_fd


def _digest(directory: str, names) -> tuple:
    """(number of files, CRC-32 of each file's name and content in turn) of ``names`` (paths relative to
    ``directory``).

    Against edits, not attacks (whoever can write the rule files beside the package can write its code too):
    a CRC-32 sees every change within 32 consecutive bits, and misses any other with a chance of 2**-32 per
    edit, a chance that adding a second 32-bit checksum (Adler-32, as before) only lowers from negligible to
    smaller at twice the cost. os.open and os.read, relative to the directory where the system can: a file
    object or a joined path costs more than the checksum of these small files (~210 a run); no hashlib (~3 ms
    to import).
    """
    dir_fd = os.open(directory, _FLAGS) if _AT else None
    crc = 0
    try:
        for name in names:
            fd = os.open(name if _AT else os.path.join(directory, name), _FLAGS, dir_fd=dir_fd)
            try:
                data = os.read(fd, _CHUNK)
                if len(data) == _CHUNK:  # a larger file: the rest (a shorter read is the end of a file)
                    chunks = [data]
                    while chunks[-1]:
                        chunks.append(os.read(fd, _CHUNK))
                    data = b"".join(chunks)
            finally:
                os.close(fd)
            crc = zlib.crc32(data, zlib.crc32(name.encode(), crc))  # each name between two files' contents
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return (len(names), crc)


def load(directory: str):
    """The built-in rules of ``directory`` from the prebuilt module (a rulelist.RuleSet), or None when it is missing,
    stale or damaged."""
    from meshlint import __version__

    built = _module()
    if built is None or getattr(built, "FORMAT", None) != FORMAT:
        return None
    if not current_by_record(directory, built) \
            and getattr(built, "FINGERPRINT", None) != fingerprint(directory, __version__):
        return None
    try:
        rules = _rules(built.RULES, directory)
    except Exception:  # noqa: BLE001 - a damaged module: parse the rule files as without one
        return None
    _install_compiled(built.FINGERPRINT)
    return rules


def _module():
    try:
        from meshlint.engine import rules_prebuilt as built
    except Exception:  # noqa: BLE001 - missing, or not even Python (a bad merge): parse the rule files
        return None
    return built


def current_by_record(directory: str, built) -> bool:
    """Whether pip's RECORD of this install (meshlint/installed.py) shows the rule files and builders with the
    content the prebuilt module was made from: each of its RECORD_LINES (path, SHA-256 and size, as RECORD writes
    them) is a line of RECORD, and the rule files there now are the ones it names. The staleness check of an
    installed wheel's ``meshlint/_rules``: one read of RECORD instead of ~210 files. False anywhere else (a
    checkout, an editable install, a rule file added since the install, a file of other content): the files'
    content is then read (``fingerprint``)."""
    if not directory.endswith("_rules"):  # a checkout's rules/: not installed by pip
        return False
    from meshlint import installed

    if directory != os.path.join(installed.PACKAGE, "_rules") or installed.record() is None:
        return False
    try:
        from meshlint.engine import rules_prebuilt_record as made
    except Exception:  # noqa: BLE001 - missing or damaged: the files' content is read
        return False
    expected = getattr(made, "RECORD_LINES", None)
    if getattr(made, "FINGERPRINT", None) != getattr(built, "FINGERPRINT", False) or expected.__class__ is not tuple \
            or not installed.lines().issuperset(expected):
        return False
    try:
        return rule_files(directory) == list(getattr(made, "RULE_FILES", ()))
    except OSError:
        return False


def record_lines(directory: str) -> tuple:
    """RECORD_LINES and RULE_FILES of the prebuilt module (for the generator; reads every file): each rule file's
    and builder's line in an installed wheel's RECORD (``meshlint/_rules/NAME,sha256=DIGEST,SIZE``), and the rule
    files' names."""
    import base64
    import hashlib

    names = rule_files(directory)
    out = []
    for shown, local in ([(f"meshlint/_rules/{n}", os.path.join(directory, n)) for n in names]
                         + [(f"meshlint/{b}", os.path.join(_PACKAGE, b)) for b in builder_files()]):
        with open(local, "rb") as f:
            data = f.read()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        out.append(f"{shown},sha256={digest},{len(data)}".encode())
    return tuple(out), tuple(names)


def entry(rule) -> tuple:
    """A parsed rule as one tuple of literal data, in Rule's field order (FIELDS): what the generator writes into
    rules_prebuilt.RULES (``stored``) and ``_rules`` builds back.

    An expression is its source, a template its split (``Template.split``: literal texts and holes' sources, so no
    run scans its text for holes again); ``lets`` is ((name, source), ...), ``help`` ((condition, template), ...);
    ``params`` is the rule's own dict (TOML data); ``doc`` is None: the docs and the expressions' trees, which no
    check reads, are in rules_prebuilt_extra (``extra``). All of it is what ``ast.literal_eval`` reads. Raises
    ValueError for a rule that cannot be written so (its data not TOML's, an expression whose tree cannot be stored).
    """
    import ast

    from meshlint.cachestore import Bad, plain

    if rule._fields != FIELDS:
        raise ValueError(f"Rule's fields are {rule._fields}: make prebuilt.FIELDS, entry and _rules follow them")

    def expression(e):
        return None if e is None else e.source

    try:
        out = (rule.code, rule.name, rule.severity, rule.summary, expression(rule.check), rule.message.split(),
               rule.path, rule.origin, rule.dialects, plain(rule.params),
               tuple((name, expression(e)) for name, e in rule.lets.items()), expression(rule.foreach),
               expression(rule.when), None if rule.key is None else rule.key.split(),
               tuple((expression(c), t.split()) for c, t in rule.help), None, rule.frameworks,
               rule.fallback, rule.skip_note)
    except Bad as exc:
        raise ValueError(f"{rule.code}: {exc}") from None
    if ast.literal_eval(repr(out)) != out:
        raise ValueError(f"{rule.code}: not literal data")
    return out


def stored(entry: tuple) -> tuple:
    """An entry as rules_prebuilt.RULES holds it: its dialects (which rules a dialect's check builds, known without
    decoding the rest) and the entry marshalled. A run decodes only the entries of the rules it builds (a run on
    KempnerForge configs 59 of 207): 1.1 M instructions less in a first run on KempnerForge's 30 configs than
    loading every rule's strings and tuples with the module."""
    import marshal

    return entry[8], marshal.dumps(entry, MARSHAL_VERSION)


def deciding(rule) -> list:
    """The expressions that decide whether a rule holds, evaluated on every config it runs on: check, when, foreach,
    lets (its help conditions and templates are evaluated only for a finding)."""
    return [e for e in (rule.check, rule.when, rule.foreach, *rule.lets.values()) if e is not None]


def extra(rules: list) -> tuple:
    """(TREES, DOCS) of rules_prebuilt_extra: each expression's source -> its tree as JSON text (``treecode``), each
    rule's code -> its doc. Only a run that builds a tree (an expression interpreted, not compiled) or shows a doc
    (``meshlint rules``, SARIF) imports them. Raises ValueError as ``entry`` does."""
    from meshlint.cachestore import Bad, plain
    from meshlint.engine.rule_cache import _encode_expr

    trees: dict = {}
    docs: dict = {}
    for rule in rules:
        found = deciding(rule) + [c for c, _ in rule.help if c is not None]
        try:
            for e in found:
                if e.source not in trees:
                    trees[e.source] = _encode_expr(e)[1]
            docs[rule.code] = plain(rule.doc)
        except Bad as exc:
            raise ValueError(f"{rule.code}: {exc}") from None
    return trees, docs


def _rules(entries: tuple, directory: str):
    """The rules ``stored`` wrote, each with its file's path in ``directory`` (where it is now, not where it was
    generated), as a RuleSet: a rule is decoded and built when a run first needs it (most runs need one dialect's).
    Every pair's shape is checked here, so a damaged module raises now (and is not used); what the shape cannot
    show raises when that rule is built."""
    from marshal import loads

    from meshlint.engine.expr import Expr, Template
    from meshlint.engine.rules import Rule
    from meshlint.engine.rulelist import RuleSet, RuleStore

    if Rule._fields != FIELDS:
        raise ValueError("Rule's fields changed")
    size = len(FIELDS)
    dialects_of = []  # each rule's dialects, known before it is built
    for e in entries:
        if e.__class__ is not tuple or len(e) != 2 or e[1].__class__ is not bytes \
                or not (e[0] is None or e[0].__class__ is tuple):
            raise ValueError(f"{e!r:.60}: an entry of another format")
        dialects_of.append(e[0])
    prefix = os.path.join(directory, "")  # + a file's name: os.path.join(directory, name)
    new = tuple.__new__  # Rule._make without its call and length check: each entry unpacks to exactly FIELDS
    tree = tree_of

    def build(index: int):
        dialects, data = entries[index]
        entry = loads(data)
        if entry.__class__ is not tuple or len(entry) != size or entry[4].__class__ is not str \
                or entry[8] != dialects:
            raise ValueError(f"rule {index + 1} of meshlint/engine/rules_prebuilt.py: an entry of another format; "
                             "regenerate it (python -m meshlint.generate.rules_prebuilt)")
        (code, name, severity, summary, check, message, path, origin, dialects, params, lets, foreach, when, key,
         help_, _doc, frameworks, fallback, skip_note) = entry
        bound = {}
        for let, e in lets:
            bound[let] = Expr(e, None, 0, tree)
        helps = []
        for cond, text in help_:
            helps.append((None if cond is None else Expr(cond, None, 0, tree), Template(None, None, text)))
        return new(Rule, (
            code, name, severity, summary, Expr(check, None, 0, tree), Template(None, None, message),
            prefix + path, origin, dialects, params, bound,
            None if foreach is None else Expr(foreach, None, 0, tree),
            None if when is None else Expr(when, None, 0, tree), None if key is None else Template(None, None, key),
            helps,
            _Doc(code, prefix + path), frameworks, fallback, skip_note))

    return RuleSet(RuleStore(dialects_of, build))


_EXTRA: list = []  # [rules_prebuilt_extra's (TREES, DOCS), or None when it cannot be used], on first need


def _extra():
    if not _EXTRA:
        found = None
        try:
            from meshlint.engine import rules_prebuilt, rules_prebuilt_extra as more

            if more.FINGERPRINT == rules_prebuilt.FINGERPRINT and more.FORMAT == FORMAT \
                    and isinstance(more.TREES, dict) and isinstance(more.DOCS, dict):
                found = (more.TREES, more.DOCS)
        except Exception:  # noqa: BLE001 - missing or damaged: trees are parsed, docs read from the rule files
            found = None
        _EXTRA.append(found)
    return _EXTRA[0]


def tree_of(source: str):
    """A built-in rule's expression's tree as JSON text (``Expr``'s lazy tree), or None: it is parsed from its source."""
    found = _extra()
    tree = found[0].get(source) if found is not None else None
    return tree if tree.__class__ is str else None


class _Doc(LazyDict):
    """A built-in rule's ``doc``, read when something reads it: from rules_prebuilt_extra, else from its rule file."""

    __slots__ = ("_code", "_path")

    def __init__(self, code: str, path: str):
        self._make, self._code, self._path = True, code, path

    def _fill(self):
        if self._make is not None:
            self._make = None
            found = _extra()
            doc = found[1].get(self._code) if found is not None else None
            if not isinstance(doc, dict):
                from meshlint.engine.rules import load_rule_file

                doc = load_rule_file(self._path, "builtin", validate=False).doc
            dict.update(self, doc)
        return self


def _install_compiled(fingerprint: tuple) -> None:
    """The rules' expressions compiled to Python (rules_compiled/), when made from the same files and code: the
    index now, each dialect's module when a run first meets that dialect (expression.compiled_for)."""
    from meshlint.engine.expr.expression import install_compiled

    try:
        from meshlint.engine import rules_compiled as index
    except ImportError:
        install_compiled({})
        return
    if getattr(index, "FINGERPRINT", None) != fingerprint:
        install_compiled({})
        return
    parts = set(getattr(index, "DIALECTS", ()))
    done: set = set()

    def install(dialect: str | None) -> bool:
        wanted = ["common", *sorted(parts)] if dialect is None else ["common"] + [dialect] * (dialect in parts)
        for part in wanted:
            if part not in done:
                done.add(part)  # tried once: a part that cannot be used is interpreted, not tried again
                _install_part(part, fingerprint)
        return len(done) == len(parts) + 1

    install_compiled({}, install)


def _install_part(part: str, fingerprint: tuple) -> None:
    from meshlint.engine.expr.expression import COMPILED
    from meshlint.modules import import_module

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules_compiled")
    if not _bytecode_ready(os.path.join(here, part + ".py")):
        return
    try:
        module = import_module(f"meshlint.engine.rules_compiled.{part}")
    except ImportError:
        return
    if getattr(module, "FINGERPRINT", None) == fingerprint:
        COMPILED.update(module.COMPILED)


def _bytecode_ready(source: str) -> bool:
    """Whether importing ``source`` loads its bytecode rather than compiling the source.

    The compiled modules are 1.5 MB of Python: compiling it costs more (1.7 s, 150 MB) than it saves.
    An installed package has its bytecode (pip compiles it at install time), and a process that may
    write bytecode compiles it once; only where none is cached and none may be written
    (PYTHONDONTWRITEBYTECODE, a development shell) would every run compile it: there the
    expressions are interpreted, with the same results.
    """
    if not sys.dont_write_bytecode:
        return True
    # importlib's path machinery, as loaded at start-up (the importlib package would cost ~2 M instructions)
    external = sys.modules.get("_frozen_importlib_external")
    if external is None:
        import importlib._bootstrap_external as external
    MAGIC_NUMBER, cache_from_source = external.MAGIC_NUMBER, external.cache_from_source
    try:
        with open(cache_from_source(source), "rb") as f:
            head = f.read(16)
        st = os.stat(source)
    except (OSError, NotImplementedError, ValueError):
        return False
    if len(head) < 16 or head[:4] != MAGIC_NUMBER:
        return False
    if int.from_bytes(head[4:8], "little") & 1:  # hash-based: checked against the source on import
        return True
    return (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)
