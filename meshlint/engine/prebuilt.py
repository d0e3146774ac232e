"""The built-in rules parsed ahead of time (meshlint/engine/rules_prebuilt.py), used only while they match the rule files.

Parsing the 154 built-in rule files (TOML, then every expression) costs a first run, with no rule
cache yet, about as much as checking 30 configs. ``python -m meshlint.generate.rules_prebuilt``
writes the parsed rules into the package, in the rule cache's own encoding, with a fingerprint of
what they were parsed from: each rule file's name, size and content checksums, and the same of the
modules that parse and encode rules. At run time the fingerprint is taken again from the files
themselves (reading them costs ~2 ms; no mtime, so it holds in a wheel too, where the rules are
``meshlint/_rules``); anything that differs, a rule file added, removed or edited, or a changed
parser, means the prebuilt module is not used and the rules are parsed as before (the rule cache,
then the files). The encoded rules are decoded by the rule cache's own checks, so a prebuilt
module holds data, never code, and its trees are rebuilt from the parser's node types only.
tests/test_rules_prebuilt.py regenerates the module and fails when it is stale.

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


def builder_files() -> tuple:
    """The modules whose code decides what a rule file parses to (relative to the meshlint package)."""
    from meshlint.engine.expr import MODULES

    return tuple(os.path.join("engine", "expr", name) for name in MODULES) + (
        os.path.join("engine", "rules.py"), os.path.join("engine", "rule_cache.py"), "cachestore.py", "limits.py",
        os.path.join("frameworks", "versions.py"), os.path.join("frameworks", "registry.py"))


def _stamp(path: str) -> tuple:
    # size and two checksums (64 bits): against edits, not attacks (whoever can write the rule files
    # beside the package can write its code too), and without hashlib's ~3 ms import
    # os.read, not open(): a file object costs more than the checksums of these small files (170 of them a run)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return (len(data), zlib.crc32(data), zlib.adler32(data))


def rule_files(directory: str) -> list:
    """The built-in rule files' names, as ``rules._load_dir`` reads them."""
    return sorted(f for f in os.listdir(directory) if f.endswith(".toml") and f != "models.toml")


def fingerprint(directory: str, version: str) -> tuple | None:
    """What the parsed rules of ``directory`` depend on, from the files' content; None if one is unreadable."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        builders = tuple((name.replace(os.sep, "/"),) + _stamp(os.path.join(here, name)) for name in builder_files())
        files = tuple((name,) + _stamp(os.path.join(directory, name)) for name in rule_files(directory))
    except OSError:
        return None
    return (version, builders, files)


def load(directory: str) -> list | None:
    """The built-in rules of ``directory`` from the prebuilt module, or None when it is missing or stale."""
    from meshlint import __version__

    try:
        from meshlint.engine import rules_prebuilt as built
    except ImportError:
        return None
    from meshlint.engine import rule_cache

    if built.FORMAT != rule_cache.FORMAT or built.FINGERPRINT != fingerprint(directory, __version__):
        return None
    try:
        rules = rule_cache._decode_value("rules", built.RULES)
    except Exception:  # noqa: BLE001 - a damaged module: parse the rule files as without one
        return None
    _install_compiled(built.FINGERPRINT)
    # stored with the file's name as its path: the path a rule is reported with is where it is now
    return [rule._replace(path=os.path.join(directory, rule.path)) for rule in rules]


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
