"""``meshlint fix`` and ``check --fix``: writing a layout's degrees into the config, changing nothing else.

Edits are spans of the original text: the value token of each changed degree (found
with meshlint's TOML position scanner, or the registry function's keyword/assignment
literal found with ``ast``), a new ``key = value`` line or keyword argument where the
degree was not written, and the numbers of a ``# meshlint: world_size=...`` directive
when the target world differs. Comments, order, spacing and line endings stay byte for
byte. Before writing, the new text is read back through the same pipeline
(``check.analyse``) and must give the same facts with the new degrees; otherwise
nothing is written. The write is atomic: a temporary file in the same directory,
flushed and fsynced, with the original's mode, then ``os.replace`` -- an interrupted
run leaves the original untouched.

"Unambiguous" (``check --fix``): the config has error findings, and among the layouts
that change exactly one degree (every other degree as written), exactly one passes
every error rule on the target. Then that one is applied; otherwise nothing is, and
the candidates are listed. Like ruff's safe fixes: never a choice meshlint had to guess.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import tempfile
from typing import NamedTuple

from meshlint.errors import MeshlintError


from meshlint.solve.edits import Edit, FixError, Plan  # noqa: E402,F401 - re-exported (cli, tests)

# ----------------------------------------------------------------------------- planning

def plan(solver, values: dict, options, batch_changes: list | None = None) -> Plan:
    """The edits that write ``values`` into the solver's config file, checked by reading the result back;
    ``batch_changes`` (from ``suggest``: the keys that keep the global batch) are written too."""
    from meshlint.solve.suggest import changes

    from meshlint.engine.check import input_kind

    report = solver.report
    source = report.source
    if getattr(source, "framework", None) == "megatron":  # a Megatron-LM launch script: its flags' values
        from meshlint.solve import fix_launch

        return fix_launch.plan(solver, values, options, batch_changes)
    file = getattr(source, "file", None) or report.path
    kind = input_kind(report.path)
    if kind not in ("toml", "registry", "yaml") or getattr(source, "launch", None) is not None:
        raise FixError(f"{report.path}: fix edits TOML and accelerate YAML configs and registry functions; the "
                       f"degrees of a launch line or a saved config are set on its command line: change them there")
    text = source.text
    edits, notes = [], []
    todo = changes(solver, values)
    extra = list(batch_changes or ())
    if getattr(source, "function", None) is not None:
        for change in todo + extra:
            edits.append(_registry_edit(source, text, change))
    elif kind == "yaml":
        for change in todo:
            edits.append(_yaml_edit(source, text, change))
    else:
        for change in todo + extra:
            edits.append(_toml_edit(source, text, change, solver))
    edits += _directive_edits(solver, text, notes)
    new = _apply(text, edits)
    _read_back(solver, values, options, file, new, {c["key"]: c["new"] for c in extra})
    function = getattr(source, "function", None)
    if function and edits:
        derived = _other_functions_changed(file, function, options, text, new)
        if derived:
            notes.append(f"{', '.join(derived)} in the same file change{'s' if len(derived) == 1 else ''} too: "
                         f"{'it derives' if len(derived) == 1 else 'they derive'} from {function}")
    return Plan(file, text, new, edits, notes)


from meshlint.solve.edits import apply as _apply, line_starts as _line_starts, newline as _newline  # noqa: E402
from meshlint.solve.edits import offset as _offset  # noqa: E402


# ----------------------------------------------------------------------------- TOML

_BARE_VALUE = re.compile(r"[^\s,#\]\}]+")


def _toml_edit(source, text: str, change: dict, solver) -> Edit:
    from meshlint.inputs.source import split_key

    key = change["key"]
    path = split_key(key)
    positions = source.positions
    what = f"{key} {change['old'] if change['old'] is not None else '(default ' + str(change['default']) + ')'} " \
           f"-> {change['new']}"
    if path in positions.keys:
        line, col = positions.keys[path]
        start = _offset(text, line, col)
        value_start = _value_start(text, start)
        value_end = _value_end(text, value_start)
        return Edit(value_start, value_end, str(change["new"]), what)
    # not written: a new line right under the section's header
    section = path[:-1]
    if section not in positions.tables:
        raise FixError(f"{key} is not written and there is no [{'.'.join(section)}] header to add it under: "
                       f"add `{path[-1]} = {change['new']}` there by hand")
    line, _col = positions.tables[section]
    starts = _line_starts(text)
    header_end = text.find("\n", starts[line - 1])
    insert_at = len(text) if header_end < 0 else header_end + 1
    nl = _newline(text)
    prefix = nl if header_end < 0 else ""
    return Edit(insert_at, insert_at, f"{prefix}{path[-1]} = {change['new']}{nl}", what)


# ----------------------------------------------------------------------------- YAML (accelerate config files)

def _yaml_edit(source, text: str, change: dict) -> Edit:
    """The scalar value of a written key replaced; an unwritten one added under its mapping's key, indented like
    that mapping's other keys (a mapping not written at all is added at the end of the file)."""
    from meshlint.inputs.source import split_key

    key = change["key"]
    path = split_key(key)
    what = f"{key} {change['old'] if change['old'] is not None else '(default ' + str(change['default']) + ')'} " \
           f"-> {change['new']}"
    if path in source.spans:
        start, end = source.spans[path]
        return Edit(start, end, str(change["new"]), what)
    if path in source._keys:
        raise FixError(f"{key} is not a plain value: set it to {change['new']} by hand")
    nl = _newline(text)
    parent = path[:-1]
    siblings = [p for p in source._keys if p[:-1] == parent and len(p) == len(path)]
    if parent and parent in source._keys and siblings:
        indent = source._keys[siblings[0]][1] - 1
        line = max(source._keys[p][0] for p in siblings)
        starts = _line_starts(text)
        after = text.find("\n", starts[line - 1])
        at = len(text) if after < 0 else after + 1
        prefix = nl if after < 0 else ""
        return Edit(at, at, f"{prefix}{' ' * indent}{path[-1]}: {change['new']}{nl}", what)
    if parent and parent not in source._keys and len(parent) == 1:
        prefix = "" if not text or text.endswith("\n") else nl
        return Edit(len(text), len(text), f"{prefix}{parent[0]}:{nl}  {path[-1]}: {change['new']}{nl}", what)
    raise FixError(f"{key} is not written and meshlint cannot tell where to add it: add `{path[-1]}: "
                   f"{change['new']}` by hand")


def _value_start(text: str, key_start: int) -> int:
    """From a key's first character to its value's: past the (dotted, quoted) key and the '='."""
    i, n = key_start, len(text)
    while i < n and text[i] != "=":
        if text[i] in "\"'":
            quote = text[i]
            i += 1
            while i < n and text[i] != quote:
                i += 2 if text[i] == "\\" and quote == '"' else 1
        if text[i] == "\n":
            raise FixError("cannot find the value after the key")
        i += 1
    i += 1
    while i < n and text[i] in " \t":
        i += 1
    return i


def _value_end(text: str, start: int) -> int:
    if start >= len(text):
        raise FixError("the key has no value")
    quote = text[start]
    if quote in "\"'":
        if text.startswith(quote * 3, start):
            raise FixError("a degree written as a multi-line string: fix it by hand")
        i = start + 1
        while i < len(text) and text[i] != quote:
            if text[i] == "\n":
                raise FixError("an unterminated string")
            i += 2 if text[i] == "\\" and quote == '"' else 1
        return i + 1
    match = _BARE_VALUE.match(text, start)
    if not match:
        raise FixError("cannot find the value's end")
    return match.end()


# ----------------------------------------------------------------------------- registries

def _registry_edit(source, text: str, change: dict) -> Edit:
    key, new = change["key"], change["new"]
    what = f"{key} {change['old'] if change['old'] is not None else '(default ' + str(change['default']) + ')'} " \
           f"-> {new}"
    leaf = key.rsplit(".", 1)[-1]
    gone = source.unknown_of(key) if hasattr(source, "unknown_of") else None
    if gone is not None:
        raise FixError(f"{key} could not be read statically ({getattr(gone, 'reason', gone)}, line "
                       f"{getattr(gone, 'line', '?')}): set it by hand")
    tree = _parse(text)
    starts = _line_starts(text)
    if source.has_key(key):
        pos = source.positions.get(key)
        if pos is None:
            raise FixError(f"{key} is set where meshlint cannot point at it: edit it by hand")
        value = _literal_at(tree, text, starts, pos, leaf)
        if value is None:
            raise FixError(f"{key} is not set by a literal at line {pos[0]} of {source.file} (computed, or set in "
                           f"another function this one derives from): edit it by hand")
        start, end = _span(text, starts, value)
        return Edit(start, end, str(new), what)
    # defaulted: a new keyword argument in the function's ParallelismConfig(...) call
    section = key.rsplit(".", 1)[0]
    pos = source.positions.get(section)
    if pos is None:
        raise FixError(f"{key} is not set, and the function builds no {section} config to add it to: add "
                       f"{leaf}={new} by hand")
    call = _call_at(tree, text, starts, pos, section.rsplit(".", 1)[-1])
    if call is None:
        raise FixError(f"{section} at line {pos[0]} is not a constructor call meshlint can add {leaf}= to: "
                       f"add {leaf}={new} by hand")
    return _insert_keyword(text, starts, call, leaf, new, what)


def _parse(text: str):
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise FixError(f"the file does not parse as Python: {exc}") from None


def _char_col(text: str, starts: list, line: int, byte_col: int) -> int:
    """1-based character column of an ast byte offset (ast columns are UTF-8 byte offsets)."""
    begin = starts[line - 1]
    end = text.find("\n", begin)
    row = text[begin:] if end < 0 else text[begin:end]
    if row.isascii():
        return byte_col + 1
    return len(row.encode("utf-8")[:byte_col].decode("utf-8", "ignore")) + 1


def _span(text: str, starts: list, node) -> tuple:
    start = starts[node.lineno - 1] + _char_col(text, starts, node.lineno, node.col_offset) - 1
    end = starts[node.end_lineno - 1] + _char_col(text, starts, node.end_lineno, node.end_col_offset) - 1
    return start, end


def _is_int_literal(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _literal_at(tree, text: str, starts: list, pos: tuple, leaf: str):
    """The int literal set for ``leaf`` at ``pos``: a keyword argument ``leaf=8`` or ``x.leaf = 8``."""
    line, col = pos
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == leaf and getattr(node, "lineno", None) == line \
                and _char_col(text, starts, line, node.col_offset) == col:
            return node.value if _is_int_literal(node.value) else None
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == leaf and target.lineno == line \
                        and _char_col(text, starts, line, target.col_offset) == col:
                    value = node.value
                    return value if value is not None and _is_int_literal(value) else None
    return None


def _call_at(tree, text: str, starts: list, pos: tuple, leaf: str):
    line, col = pos
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.keyword) and node.arg == leaf and getattr(node, "lineno", None) == line \
                and _char_col(text, starts, line, node.col_offset) == col:
            value = node.value
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == leaf and target.lineno == line \
                        and _char_col(text, starts, line, target.col_offset) == col:
                    value = node.value
        if value is not None:
            if isinstance(value, ast.Call) and not any(k.arg is None for k in value.keywords):
                return value
            return None
    return None


def _insert_keyword(text: str, starts: list, call, leaf: str, new: int, what: str) -> Edit:
    _start, end = _span(text, starts, call)
    close = end - 1  # the ')'
    if text[close] != ")":
        raise FixError("cannot find the call's closing parenthesis")
    args = list(call.args) + list(call.keywords)
    if not args:
        return Edit(close, close, f"{leaf}={new}", what)
    last = max(args, key=lambda a: (a.end_lineno, a.end_col_offset))
    _ls, last_end = _span(text, starts, last.value if isinstance(last, ast.keyword) else last)
    between = text[last_end:close]
    comma = between.find(",")
    trailing = comma >= 0 and not between[:comma].strip()
    if last.end_lineno == call.lineno or "\n" not in text[_span(text, starts, call)[0]:close]:
        return Edit(last_end, last_end, f", {leaf}={new}", what)  # one line: append
    # one argument per line: a new line with the last argument's indentation
    first_line = (last.lineno if not isinstance(last, ast.keyword) else last.lineno)
    row_start = starts[first_line - 1]
    indent = re.match(r"[ \t]*", text[row_start:]).group(0)
    nl = _newline(text)
    if trailing:
        at = last_end + comma + 1
        return Edit(at, at, f"{nl}{indent}{leaf}={new},", what)
    return Edit(last_end, last_end, f",{nl}{indent}{leaf}={new}", what)


# ----------------------------------------------------------------------------- the world in directives

_DIRECTIVE_NUMBER = re.compile(r"\b(world_size|gpus_per_node|nodes)\s*=\s*([0-9]+)")


def _directive_edits(solver, text: str, notes: list) -> list:
    """Keep a ``# meshlint:`` directive that states the world in step with the target; say so when the
    file's world comes from somewhere fix does not edit (its name, a launch line in a comment)."""
    from meshlint.mesh.topology import topology_for
    from meshlint.mesh.topology import CliTopology

    report, t = solver.report, solver.target
    opts = solver.options
    try:
        own = topology_for(report.source, report.spec, CliTopology(None, None, None, t.placement), opts.file_hint,
                           opts.profile_hint)
    except Exception:  # noqa: BLE001 - a source without comments (a launch line): nothing to keep in step
        return []
    edits = []
    want = {"world_size": t.world_size, "gpus_per_node": t.gpus_per_node}
    if t.gpus_per_node:
        want["nodes"] = -(-t.world_size // t.gpus_per_node)
    sources = {"world_size": own.world_source, "gpus_per_node": own.gpus_per_node_source}
    current = {"world_size": own.world_size, "gpus_per_node": own.gpus_per_node}
    starts = _line_starts(text)
    done_lines = set()
    for what in ("world_size", "gpus_per_node"):
        if want[what] is None or current[what] is None or current[what] == want[what]:
            continue
        where = sources[what] or ""
        m = re.match(r"directive on line (\d+)", where)
        if not m or getattr(report.source, "function", None) is not None and int(m.group(1)) > len(starts):
            notes.append(f"the file's {what.replace('_', ' ')} comes from {where} ({current[what]}): check the "
                         f"fixed file with --{what.replace('_', '-')} {want[what]}")
            continue
        line = int(m.group(1))
        if line in done_lines:
            continue
        done_lines.add(line)
        begin = starts[line - 1]
        end = text.find("\n", begin)
        row = text[begin:] if end < 0 else text[begin:end]
        for match in _DIRECTIVE_NUMBER.finditer(row):
            name, number = match.group(1), int(match.group(2))
            if want.get(name) is not None and number != want[name]:
                a = begin + match.start(2)
                edits.append(Edit(a, a + len(match.group(2)), str(want[name]),
                                  f"directive {name} {number} -> {want[name]}"))
    return edits


# ----------------------------------------------------------------------------- reading back

def _read_back(solver, values: dict, options, file: str, new: str, batch: dict | None = None) -> None:
    """The new text must read back to the same facts with the new degrees and batch values (else FixError, nothing
    written)."""
    from meshlint.engine.check import analyse

    report = solver.report
    function = getattr(report.source, "function", None)
    path = f"{file}::{function}" if function else file
    try:
        again = analyse(path, options, raw=new.encode("utf-8"), name=os.path.basename(file))
    except MeshlintError as exc:
        raise FixError(f"the edited file would not read back: {exc}") from None
    if again.status != "checked":
        why = again.error.message if again.error is not None else again.note
        raise FixError(f"the edited file would not read back: {why}")
    expected = solver.materialize(values)
    problems = []
    if again.spec.degrees != expected.degrees:
        problems.append(f"degrees {again.spec.degrees} instead of {expected.degrees}")
    want = {**report.spec.values, **(batch or {})}
    if again.spec.values != want:
        keys = sorted(k for k in set(again.spec.values) | set(want)
                      if again.spec.values.get(k) != want.get(k))
        problems.append(f"other values changed: {', '.join(keys[:5])}")
    if again.spec.problems != expected.problems:
        problems.append("its invalid values differ")
    if again.spec.unknown_keys != report.spec.unknown_keys:
        problems.append("its unknown keys differ")
    if (getattr(again.spec, "framework", None) or {}).get("version") != \
            (getattr(report.spec, "framework", None) or {}).get("version"):
        problems.append("it would be read as another framework version")
    if report.spec.dialect == "native":
        sizes = [d["size"] for d in again.spec.extra.get("dims", [])]
        if sizes != [d["size"] for d in expected.extra.get("dims", [])]:
            problems.append(f"dim sizes {sizes}")
    cli = options.topology
    if cli.world_size is None and cli.nodes is None and again.topology.world_size != solver.target.world_size:
        problems.append(f"its world size reads as {again.topology.world_size}, not {solver.target.world_size}")
    if problems:
        raise FixError("refusing to write: the edited file would read back differently (" + "; ".join(problems) + ")")


def _other_functions_changed(file: str, function: str, options, old: str, new: str) -> list:
    """The registry's other config functions whose facts the edit changes (they derive from the edited one)."""
    from meshlint.engine.check import analyse_all

    def specs(text: str) -> dict:
        out = {}
        for r in analyse_all(file, options, raw=text.encode("utf-8"), name=os.path.basename(file)):
            if r.status == "checked" and not r.path.endswith(f"::{function}"):
                out[r.path.rsplit("::", 1)[-1]] = (r.spec.degrees, r.spec.values)
        return out

    before, after = specs(old), specs(new)
    return sorted(name for name in before if after.get(name) != before[name])


# ----------------------------------------------------------------------------- writing

def unified_diff(p: Plan) -> str:
    name = p.path
    old, new = (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")
    lines = difflib.unified_diff(p.old.splitlines(keepends=True), p.new.splitlines(keepends=True),
                                 fromfile=old, tofile=new)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text``: a temporary file in its directory, fsynced, its mode, then os.replace."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError as exc:
        raise FixError(f"cannot read {path}: {exc.strerror or exc}") from None
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".meshlint-fix")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise FixError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def apply_plan(p: Plan) -> None:
    """Write the plan, unless the file changed since it was read."""
    try:
        with open(p.path, encoding="utf-8", newline="") as f:
            on_disk = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise FixError(f"cannot read {p.path}: {exc}") from None
    if on_disk != p.old:
        raise FixError(f"{p.path} changed while meshlint was fixing it: nothing written, run it again")
    write_atomic(p.path, p.new)


# ----------------------------------------------------------------------------- choosing the layout

def parse_set(text: str, names: tuple) -> dict:
    """``tp=4,pp=2`` -> {"tp": 4, "pp": 2}, checked against the framework's degrees."""
    out = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        name, eq, value = part.partition("=")
        if not eq or not value.isascii() or not value.isdigit() or len(value) > 8:
            raise FixError(f"--set {part!r}: expected degree=N (e.g. tp=4,pp=2)")
        if name not in names:
            raise FixError(f"--set {name}: not a degree of this config's framework ({', '.join(names)})")
        if int(value) < 1:
            raise FixError(f"--set {name}={value}: degrees are at least 1")
        out[name] = int(value)
    if not out:
        raise FixError("--set needs at least one degree=N")
    return out


class FixResult(NamedTuple):
    path: str
    applied: bool
    plan: Plan | None
    message: str


def single_change_layouts(report, options, degrees: tuple | None = None, limit: int = 50) -> list:
    """[(degree, layout)]: the valid layouts that change exactly one of ``degrees`` (default: any degree),
    every other degree as the config has it."""
    from meshlint.engine.search.valid import Solver

    base = Solver(report, options)
    names = base.space.names
    out = []
    for name in degrees or names:
        if base.current.get(name) is None and name != base.space.fill:
            continue
        try:
            solver = Solver(report, options, base.target._replace(vary=(name,), keep=()))
        except MeshlintError:
            continue
        for values in solver.layouts():
            if values[name] == base.current.get(name):
                continue
            out.append((name, values))
            if len(out) > limit:
                return out
    return out


def unambiguous(report, options, findings: list | None = None) -> tuple:
    """(values, candidates): the fix ``check --fix`` may apply, or None with the candidates it saw.

    Unambiguous means: every error finding points at a degree's key (``finding.key``), and among
    the layouts that change exactly one of those degrees -- the rest as written -- exactly one
    passes every error rule on the target. A finding that points elsewhere (a microbatch count, a
    model size) or two ways out are left to the user (``meshlint fix --set``, ``meshlint suggest``).
    """
    from meshlint.engine.check import run_checks
    from meshlint.engine.search.space import space_for

    if findings is None:
        findings = run_checks(report, options).findings
    errors = [f for f in findings if f.severity == "error"]
    if not errors or report.spec.dialect == "native":
        return None, []
    space = space_for(report.spec)
    by_key = {key: name for name, key in space.keys.items() if name in space.names}
    named = [by_key.get(f.key) for f in errors]
    if any(n is None for n in named):
        return None, []
    found = single_change_layouts(report, options, tuple(dict.fromkeys(named)))
    unique = {tuple(sorted(v.items())): v for _n, v in found}
    if len(unique) == 1:
        return next(iter(unique.values())), found
    return None, found


def fix_report(report, options, write: bool = True) -> FixResult:
    """``check --fix`` for one analysed report: apply its unambiguous fix, if it has errors and one."""
    from meshlint.engine.check import run_checks
    from meshlint.engine.search.valid import Solver

    if report.status != "checked":
        return FixResult(report.path, False, None, "not checked")
    checked = run_checks(report, options)
    if not any(f.severity == "error" for f in checked.findings):
        return FixResult(report.path, False, None, "no errors")
    try:
        values, found = unambiguous(report, options, checked.findings)
    except MeshlintError as exc:
        return FixResult(report.path, False, None, f"no fix: {exc}")
    if values is None:
        if not found:
            return FixResult(report.path, False, None, "no unambiguous fix (see meshlint suggest)")
        shown = "; ".join(f"{n}={v[n]}" for n, v in found[:6])
        return FixResult(report.path, False, None, f"{len(found)} possible fixes ({shown}{', ...' if len(found) > 6 else ''}"
                                                   f"): not applied, choose with meshlint fix --set")
    solver = Solver(report, options)
    try:
        p = plan(solver, values, options)
        if write:
            apply_plan(p)
    except FixError as exc:
        return FixResult(report.path, False, None, f"no fix: {exc}")
    return FixResult(report.path, True, p, "fixed: " + "; ".join(e.what for e in p.edits))


def fix_path(path: str, options) -> list:
    """``check --fix`` for one input path: each config's unambiguous fix, re-reading the file after each
    write (a registry holds several configs; the next one is fixed on the new text)."""
    from meshlint.engine.check import analyse_all

    results: list = []
    done: set = set()
    for _round in range(64):  # at most one write per config; the bound only guards the loop
        applied = False
        for report in analyse_all(path, options):
            if report.path in done:
                continue
            done.add(report.path)
            result = fix_report(report, options)
            results.append(result)
            if result.applied:
                applied = True
                break  # the file changed: read it again before the next config
        if not applied:
            return results
    return results
