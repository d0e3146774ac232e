"""The frameworks' full config schemas (generated into meshlint/data/schema/), and a check of a config against them that accepts and refuses what the framework itself does.

    from meshlint.frameworks import schema_data
    schema = schema_data.load("torchtitan", "0.2.x")       # cheap: the JSON is read on first use
    schema.key("parallelism.data_parallel_shard_degree")   # {"type": {"kind": "int"}, "default": -1, ...}
    for problem in schema.check(data):                     # data: the config as nested dicts
        print(problem["level"], problem["key"], problem["message"])

Each problem is a plain dict:

    kind        "unknown-key" | "wrong-type" | "invalid-value" | "refused-value" (a check of the section's
                __post_init__ that reads only its own keys fails) | "not-a-table" | "unknown-variant"
    key         dotted path of the offending key ("checkpoint.intervall", "data.datasets[1].weigth")
    section     the table it sits in ("checkpoint", "data.datasets[1]", "" for the top level)
    name        the key's own name
    suggestion  unknown keys: the closest key of that table (difflib), or None
    elsewhere   unknown keys: other tables that do define this name (e.g. ["train"])
    other_versions  unknown keys: other versions of the framework whose same table has it (renamed keys)
    level       "error" (the framework refuses the config, or keeps a value it cannot use),
                "warning" (the framework converts it and goes on, but not to what was written),
                "info" (an exact, harmless conversion: int 1 for a float field)
    refused     True when the framework itself stops on it (at load, or when the config is built)
    framework   what the framework does with it, in words, with its own error text where it raises
    effective   the value the framework ends up with, when it goes on
    expected    what the key takes, in words
    value       the value as written (short)
    source      where the framework defines the key or raises (path:line at the schema's commit)
    message     one line for a finding

``origin``: "file" (a TOML file, or the values a Python registry function sets: same rules
in the registry era), or "cli" (values as typed on a command line: strings, parsed the way
the framework's command line does).
"""

from __future__ import annotations

import marshal
import os

from meshlint import fastre, jsonfast
from meshlint.errors import MeshlintError

DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "schema")
# version ids people use -> the schema that describes them
ALIASES = {
    ("torchtitan", "0.2.0"): "0.2.x", ("torchtitan", "0.2.1"): "0.2.x", ("torchtitan", "0.2.2"): "0.2.x",
    ("torchtitan", "toml"): "0.2.x", ("torchtitan", "v0.1.0"): "0.1.0", ("torchtitan", "main"): "main@b5bcd76c6", ("torchtitan", "b5bcd76c6"): "main@b5bcd76c6",
    ("kempnerforge", "main"): "5666d0d",
}
_FRAMEWORK_WORD = {"kempnerforge": "KempnerForge", "torchtitan": "torchtitan"}
_SCHEMAS: dict = {}


class SchemaError(MeshlintError):
    """No generated schema for this framework/version (names the ones there are)."""


def available() -> list:
    """(framework, version) of every generated schema, sorted."""
    out = []
    for name in sorted(os.listdir(DIR)) if os.path.isdir(DIR) else []:
        if name.endswith(".json"):
            framework, _, version = name[:-5].partition("-")
            out.append((framework, version))
    return out


def load(framework: str, version: str) -> "Schema":
    """The schema of ``framework`` at ``version`` (cached; the file is read on first use)."""
    version = ALIASES.get((framework, version), version)
    schema = _SCHEMAS.get((framework, version))
    if schema is None:
        path = os.path.join(DIR, f"{framework}-{version}.json")
        if not os.path.isfile(path):
            have = ", ".join(f"{f} {v}" for f, v in available()) or "none"
            raise SchemaError(f"no config schema for {framework} {version} (generated: {have})")
        schema = _SCHEMAS[(framework, version)] = Schema(framework, version, path)
    return schema


class Schema:
    """One framework version's config schema: tables, keys, and the loader's own rules."""

    def __init__(self, framework: str, version: str, path: str):
        self.framework, self.version, self.path = framework, version, path
        self._data: dict | None = None
        self._merged: dict = {}
        self._walked: dict = {}  # a section's problems by its text, for the next config that writes it the same

    @property
    def data(self) -> dict:
        if self._data is None:
            module = _prewritten(self.framework, self.version)
            data = getattr(module, "DATA", None)  # the file's content, generated with the module's functions
            if type(data) is not dict:
                with open(self.path, encoding="utf-8") as f:
                    data = jsonfast.loads(f.read())
            self._data = data
            _COMPILED.update(getattr(module, "COMPILED", {}))
            _NAMES.update(getattr(module, "SELF_NAMES", {}))
        return self._data

    @property
    def loader(self) -> dict:
        return self.data["loader"]

    @property
    def era(self) -> str:
        return self.loader.get("era", "toml")

    def sections(self) -> list:
        """The top-level keys (sections and top-level values) the framework defines."""
        return list(self.keys(""))

    def tables(self) -> list:
        return list(self.data["tables"])

    def keys(self, table: str = "", cls: str | None = None) -> dict:
        """name -> key entry of a table (the union over the classes that may stand there, or one of them)."""
        cache = (table, cls)
        merged = self._merged.get(cache)
        if merged is None:
            entry = self.data["tables"].get(_pattern(table))
            merged = {}
            if entry is not None:
                for qn in ([cls] if cls else entry["classes"]):
                    for name, key in self.data["classes"].get(qn, {"keys": {}})["keys"].items():
                        merged.setdefault(name, key)
            self._merged[cache] = merged
        return merged

    def key(self, dotted: str) -> dict | None:
        """The entry of a dotted key ("training.dataloader.num_workers", "data.datasets[].path"), or None."""
        table, _, leaf = _pattern(dotted).rpartition(".")
        if table not in self.data["tables"]:
            return None
        return self.keys(table).get(leaf)

    def default(self, dotted: str):
        """(True, default) for a key with a literal default, (False, None) otherwise."""
        key = self.key(dotted)
        return (True, key["default"]) if key is not None and "default" in key else (False, None)

    # ------------------------------------------------------------------------- the check

    def check(self, data: dict, origin: str = "file", custom_module: str | None = None, types: dict | None = None,
              unknown_names: dict | None = None) -> list:
        """Every key of ``data`` the framework would refuse, or read differently from what it says.

        ``custom_module``: torchtitan v0.2's ``--job.custom_config_module`` from the launch line (the file's own
        ``job.custom_config_module`` is read from ``data``): it extends JobConfig, so unknown keys become warnings.
        ``types``: a registry config's classes as written (PySource.types: dotted path -> "FullAC.Config"): each
        table is checked against the class the code built, not the union of the classes that may stand there;
        a class the schema does not know (a user's subclass) leaves its table unchecked. ``unknown_names``:
        table path -> names set there to values that could not be read (the names are still checked).
        """
        if origin not in ("file", "cli"):
            raise ValueError(f"origin must be 'file' or 'cli', not {origin!r}")
        problems: list = []
        if isinstance(data, dict):
            self.data  # noqa: B018 - loaded here once; the walk reads self._data directly
            ctx = _Context(self, origin, data)
            if custom_module:
                ctx.custom_module = custom_module
            ctx.types = types
            ctx.unknown_names = unknown_names or {}
            self._walk(ctx, "", "", data, problems)
        return problems

    def _walk(self, ctx, pattern: str, where: str, table: dict, problems: list, implied: str | None = None) -> None:
        if not where or "." in where or "[" in where or ctx.types is not None or ctx.unknown_names \
                or ctx.origin != "file":  # (nested tables are part of their section's text)
            self._walk_table(ctx, pattern, where, table, problems, implied)
            return
        # A section's verdict depends only on what it holds (and where, and the job's custom module): the configs of
        # a project repeat most of theirs ([checkpoint], [train], ...). Keyed by the values' marshal bytes (repr for a
        # date), which tell their types apart (1, 1.0, true) and give equal bytes only for equal values; the problems
        # are handed out as copies (callers add to them).
        try:
            text = marshal.dumps(table, 2)  # version 2: no back-references, so equal tables give equal bytes
        except ValueError:
            text = repr(table)
        key = (pattern, where, implied, ctx.custom_module, text)
        found = self._walked.get(key)
        if found is None:
            found = []
            self._walk_table(ctx, pattern, where, table, found, implied)
            if len(self._walked) >= _WALKED_MAX:
                self._walked.clear()
            self._walked[key] = found
        if found:
            problems.extend(_fresh(p) for p in found)

    def _walk_table(self, ctx, pattern: str, where: str, table: dict, problems: list,
                    implied: str | None = None) -> None:
        entry = self._data["tables"].get(pattern)
        if entry is None:
            return
        if "same_as" in entry:  # a config nesting its own kind: read as the table it repeats
            pattern = entry["same_as"]
            entry = self._data["tables"].get(pattern)
            if entry is None:
                return
        dispatch = entry.get("dispatch")
        cls = None
        if dispatch:
            arch = table.get(dispatch["key"], dispatch["default"])
            if not isinstance(arch, str) or arch not in dispatch["map"]:
                does = dispatch["unknown"].replace("{arch!r}", repr(arch)).replace("[...]", repr(sorted(dispatch["map"])))
                problems.append(_problem(ctx, "unknown-variant", where, dispatch["key"], arch, "error", True,
                                         f"{ctx.word} refuses the whole config: {does}",
                                         expected="one of " + ", ".join(sorted(dispatch["map"])),
                                         source=dispatch["unknown_source"]))
                return
            cls = dispatch["map"][arch]
        elif ctx.types is not None:
            written_class = ctx.types.get(where)
            if written_class is None:
                # not built here: the default the enclosing class gives it (Trainer.Config's for the top level)
                cls = implied if where else entry.get("default_class")
                if cls not in self._data["classes"] or cls not in entry["classes"]:
                    cls = None  # the union of the classes that may stand here: nothing refused on a guess
            else:
                cls = self._resolve(pattern, written_class)
                if cls is None:
                    if where == "":  # a trainer config the schema does not know (an RL PolicyTrainer.Config):
                        for name, raw in table.items():  # its sections built from known classes still are checked
                            if isinstance(raw, dict) and isinstance(ctx.types.get(name), str) \
                                    and name in self._data["tables"]:
                                self._walk(ctx, name, name, raw, problems)
                    return  # a class the schema does not know (a user's own subclass): nothing is guessed
        plan = self._merged.get(("plan", pattern, cls)) or self._plan(pattern, cls)  # each section: no call on a hit
        keys, fast = plan.keys, plan.fast if ctx.origin == "file" else {}
        written = None        # what the section's own checks will see (built only when they run)
        typed: dict = {}      # name -> its type problem, where a later refusal is merged in
        stopped: set = set()  # names whose value already stopped the framework
        pseudo = self._data["loader"].get("pseudo_sections", {}) if where == "" else {}
        exact = plan.exact if ctx.origin == "file" else {}
        for name, raw in table.items():
            if exact.get(name) is raw.__class__:
                continue  # the common case: a plain value of the declared type (its fast test, without the call)
            ok = fast.get(name)
            if ok is not None and ok(raw):
                continue
            lookup = name.replace("-", "_") if ctx.origin == "cli" and isinstance(name, str) else name
            key = keys.get(lookup)
            if key is None:
                if name in pseudo:
                    continue
                problems.append(self._unknown(ctx, pattern, where, name, list(keys), plan.class_name))
                continue
            path = f"{where}.{name}" if where else str(name)
            if "table" in key:
                self._child(ctx, key, pattern, name, path, raw, problems, cls)
                continue
            problem = _judge(ctx, key, path, name, raw)
            if problem is None:
                continue
            if not problem["refused"] and path in self.loader.get("read_at_load", {}):
                _read_at_load(ctx, problem, raw, self.loader["read_at_load"][path])
            problems.append(problem)
            typed[lookup] = problem
            if written is None:
                written = {k: v for k, v in table.items() if k in keys}
            if problem["refused"]:
                stopped.add(lookup)
                written[lookup] = _UNKNOWN
            elif "effective" in problem:
                written[lookup] = problem["effective"]
        for name in ctx.unknown_names.get(where, ()):
            if name not in keys and name not in table and name not in pseudo:
                problems.append(self._unknown(ctx, pattern, where, name, list(keys), plan.class_name))
        if plan.check_names is None or (ctx.types is not None and cls is None and plan.ambiguous):
            return  # no __post_init__ checks, or a registry config whose class here is not known
        steps, names = self._merged.get(("live", plan.qn)) or self._live(plan.qn, keys)
        if written is None:
            if names.isdisjoint(table):
                return  # nothing this config writes is checked: the common case, kept cheap
            written = {k: v for k, v in table.items() if k in keys}
        if written:
            values = _Section(self, pattern, {}, keys, self._instance_defaults(pattern, entry, plan.qn, where))
            values.written = written
            self._checks(ctx, steps, where, values, typed, stopped, problems)

    def _live(self, qn: str, keys: dict) -> tuple:
        """The steps of a class's __post_init__ and the fields its checks read; computed once per class."""
        cache = ("live", qn)
        hit = self._merged.get(cache)
        if hit is None:
            steps, names = [], set()
            for prepared in self._prepared(qn, keys):
                step, read = prepared[0], prepared[1]
                if step["kind"] != "assign":
                    names |= read
                steps.append(prepared)
            if not names:
                steps = []
            hit = self._merged[cache] = (steps, frozenset(names))
        return hit

    def _resolve(self, pattern: str, written: str) -> str | None:
        """The schema class a registry wrote (``GrainDataLoader.Config``): among the table's classes, else any."""
        cache = ("resolve", pattern, written)
        if cache not in self._merged:
            tail = "." + written
            found = [qn for qn in self._data["tables"][pattern]["classes"] if qn.endswith(tail) or qn == written]
            if not found:
                found = [qn for qn in self._data["classes"] if qn.endswith(tail) or qn == written]
            self._merged[cache] = found[0] if len(found) == 1 else None
        return self._merged[cache]

    def _plan(self, pattern: str, cls: str | None) -> "_Plan":
        """Everything the walk needs of a table (one class, or the union), computed once per process."""
        cache = ("plan", pattern, cls)
        plan = self._merged.get(cache)
        if plan is None:
            entry = self._data["tables"][pattern]
            keys = self.keys(pattern, cls)
            qn = cls or entry.get("default_class") or entry["classes"][0]
            model = self.loader["types"]["model"]
            fast = {}
            for name, key in keys.items():
                if "table" not in key:
                    # a plain int/float/bool/str field's test without the call (most fields are)
                    test = _FAST.get(key["type"]["kind"]) or _fast_test(key["type"], model)
                    if test is not None:
                        fast[name] = test
            steps = self._data["classes"].get(qn, {}).get("checks", [])
            names = set()
            for step in steps:
                if step["kind"] != "assign":
                    names.update(_self_order(step))
            plan = self._merged[cache] = _Plan(keys, fast, qn, self._data["classes"][qn]["name"],
                                               frozenset(names) if steps else None, len(entry["classes"]) > 1)
        return plan

    def _instance_defaults(self, pattern: str, entry: dict, qn: str, where: str) -> dict:
        """KempnerForge rebuilds a written section from the default instance: what its __post_init__
        filled in (n_kv_heads = n_heads = 32) is the default for keys the file leaves out."""
        if not where or "." in where:
            return {}
        cache = ("instance", pattern, qn)  # looked up first: each section written asks (~0.5 M instructions)
        hit = self._merged.get(cache)
        if hit is not None:
            return hit
        if self.loader.get("section_defaults") != "instance" or entry.get("optional") or entry.get("array") \
                or "default_class" not in entry:
            hit = self._merged[cache] = {}
            return hit
        section = _Section(self, pattern, {}, self.keys(pattern, qn))
        for step in self.data["classes"].get(qn, {}).get("checks", []):
            if step["kind"] == "assign" and _holds(step.get("when", []), section, {})[0] is True:
                section.assigned[step["target"]] = _value(step["value"], section, {})
        hit = self._merged[cache] = {k: v for k, v in section.assigned.items() if v is not _UNKNOWN}
        return hit

    def _prepared(self, qn: str, keys: dict) -> list:
        """A class's __post_init__ steps with what each needs, computed once: [(step, names it reads, the same
        in order, the membership test it is or None, its conditions ready to evaluate, their local names)]."""
        cache = ("prepared", qn)
        prepared = self._merged.get(cache)
        if prepared is None:
            # membership tests against a registry or a local name: bound to the values the schema found
            members = {k["enum_check"]["source"]: k["enum_check"] for k in keys.values() if "enum_check" in k}
            prepared = []
            for step in self.data["classes"].get(qn, {}).get("checks", []):
                if step["kind"] == "assign":
                    prepared.append((step, frozenset(), (), None, tuple(step.get("when", [])), {}))
                    continue
                order = tuple(_self_order(step))  # the fields of its condition and its whens, once each
                member = members.get(step["source"])
                condition, local = _seed(step, member["values"] if member else None)
                # conditions stay text until first evaluated: a check never reached is never compiled
                prepared.append((step, frozenset(order), order, member, tuple(step.get("when", [])) + (condition,),
                                 local))
            self._merged[cache] = prepared
        return prepared

    def _checks(self, ctx, prepared: list, where: str, values: "_Section", typed: dict, stopped: set,
                problems: list) -> None:
        """The section's own ``__post_init__``: what it fills in, then each check that reads a key this
        config writes. They run when the framework builds the section, so a failing one refuses the config."""
        if not prepared:
            return
        written = values.written
        for step, names, order, member, conds, seed in prepared:
            if step["kind"] == "assign":
                state, _, _ = _holds(conds, values, {})
                if state is True:
                    values.assigned[step["target"]] = _value(step["value"], values, {})
                elif state is not False:
                    values.assigned[step["target"]] = _UNKNOWN
                continue
            if names.isdisjoint(written) or not names.isdisjoint(stopped):
                continue
            state, local, error = _holds(conds, values, seed)  # read, never changed: no copy
            if state is not True and state != "raises":
                continue  # the usual case: the check passes (or cannot be decided)
            mine = [n for n in order if n in written]
            if state is True:
                text = f"{step['exception']}: {_fill(step['message'], values, local)}"
                culprits = _culprits(step["condition"], values, local)  # `a <= 0 or b <= 0`: point at the one
                culprits = culprits or _loop_culprits(local)  # `for name, val in [...]`: the item that failed
                if culprits:
                    mine = [n for n in mine if n in culprits] or mine
            else:
                text = f"{error} (while checking {step['condition']})"
            section = f"[{where}]" if where else "the top level"
            does = f"refuses the config when it builds {section} (__post_init__ at {step['source']}): {text}"
            name = next((n for n in mine if n in typed), mine[0])
            earlier = typed.get(name)
            if earlier is not None and not earlier["refused"]:
                earlier.update(level="error", refused=True, source=step["source"], framework=f"{ctx.word} {does}")
                earlier["message"] = f"{earlier['key']} = {earlier['value']}: expected {earlier['expected']}; " \
                                     f"{earlier['framework']}"
                earlier.pop("effective", None)
                stopped.add(name)
                continue
            if earlier is not None:
                continue
            raw = values.written.get(name)
            deep = _deepest(step, values) if not where else None
            if deep is not None:  # a top-level check on a nested key: point at that key
                name, raw = deep
            expected = ""
            if member:
                expected = "one of " + ", ".join(repr(v) for v in member["values"])
                if "registry" in member:
                    does += " (or a name your own code registers)"
            out = _problem(ctx, "invalid-value" if member else "refused-value", where, name, raw, "error", True,
                           f"{ctx.word} {does}", expected=expected, source=step["source"])
            out["message"] = f"{out['key']} = {out['value']}: {out['framework']}"
            prefix = out["key"][: len(out["key"]) - len(str(name))]  # the section's path, as the key writes it
            out["reads"] = [out["key"]] + [prefix + n for n in order if n != name]  # every field the check reads
            problems.append(out)
            typed[name] = out
            stopped.add(name)

    def _child(self, ctx, key: dict, pattern: str, name, path: str, raw, problems: list,
               parent: str | None = None) -> None:
        # the child's table from this table's own path (a class met at several paths names only the first),
        # worked out once: each section written asks
        cache = ("child", pattern, name, key["table"])
        child = self._merged.get(cache)
        if child is None:
            child = f"{pattern}.{name}".lstrip(".") + ("[]" if key["table"].endswith("[]") else "")
            if child not in self._data["tables"]:
                child = key["table"]
            self._merged[cache] = child
        # a registry section the code did not build is its default: known when this table's class is
        implied = key.get("default_factory") if parent is not None else None
        if child.endswith("[]"):
            if isinstance(raw, list) and all(isinstance(x, dict) for x in raw):
                for i, item in enumerate(raw):
                    self._walk(ctx, child, f"{path}[{i}]", item, problems)
                return
        elif isinstance(raw, dict):
            self._walk(ctx, child, path, raw, problems, implied)
            return
        if raw is None and key["type"]["kind"] == "optional":
            return
        what = "an array of tables" if child.endswith("[]") else "a table"
        problems.append(_problem(ctx, "not-a-table", path.rpartition(".")[0], path.rpartition(".")[2], raw, "error",
                                 False, f"{ctx.word} keeps the {_type_word(raw)} where {what} belongs; "
                                        "it fails where the section is used",
                                 expected=what, source=key["source"]))

    def _unknown(self, ctx, pattern: str, where: str, name, names: list, class_name: str) -> dict:
        from difflib import get_close_matches  # only needed when something is misspelt

        text = str(name)
        probe = text.replace("-", "_") if ctx.origin == "cli" else text
        close = same_degree(probe, names) or get_close_matches(probe, names, n=1, cutoff=0.6)
        elsewhere = [t for t in self.data["tables"] if t != pattern and probe in self.keys(t)][:3]
        source = self.loader["unknown_keys"]["source"]
        level, refused = "error", True
        if ctx.origin == "cli" and self.framework == "torchtitan":
            flag = "--" + (f"{where}.{text}" if where else text)
            does = f"torchtitan's command line (tyro) exits with status 2: Unrecognized options: {flag}"
        elif self.framework == "kempnerforge":
            does = (f"KempnerForge refuses the whole config: ValueError: Unknown config keys in {class_name}: "
                    f"[{text!r}]")
        elif self.era == "registry":
            does = (f"torchtitan refuses the config when its function runs: TypeError: {class_name}.__init__() got "
                    f"an unexpected keyword argument {text!r} (or AttributeError when it is assigned)")
        elif self.loader["unknown_keys"].get("refused") is False:  # torchtitan 0.1.0: dropped without a word
            level, refused = "warning", False
            what = "section" if not where else "key"
            does = (f"{ctx.word} {self.version} ignores it silently (ConfigManager._dict_to_dataclass reads only the "
                    f"fields {class_name} has), so the {what} and what it sets have no effect")
            if ctx.custom_module:
                does += (f", unless the custom JobConfig in {ctx.custom_module} (experimental.custom_args_module) "
                         "defines it, which meshlint cannot see")
        else:
            does = (f"torchtitan refuses the whole config: ValueError: Invalid field names in <class "
                    f"'{self._qn(pattern, class_name)}'> data: {{{text!r}}} (unless --job.custom_config_module on the "
                    "command line extends JobConfig with it)")
        if ctx.custom_module and self.era == "toml" and self.framework == "torchtitan" and refused:
            level, refused = "warning", False
            does = (f"torchtitan refuses it unless the custom JobConfig in {ctx.custom_module} "
                    "(job.custom_config_module) defines it, which meshlint cannot see")
        suggestion = close[0] if close else None
        versions = self._other_versions(pattern, probe)
        hints = ([f"did you mean {suggestion}?"] if suggestion else []) + (
            [f"{text} is a key of [{where}] in {ctx.word} {' and '.join(versions)}: is the config for that version?"]
            if versions and where else []) + ([f"{text} is a key of [{elsewhere[0]}]"] if elsewhere and not versions else [])
        hint = f" ({'; '.join(hints)})" if hints else ""
        section = f"in [{where}]" if where else "at the top level"
        out = _problem(ctx, "unknown-key", where, name, None, level, refused, does,
                       source=source[0] if isinstance(source, list) else source)
        out.update(suggestion=suggestion, elsewhere=elsewhere, other_versions=versions, class_name=class_name,
                   message=f"unknown key '{text}' {section}{hint}: {does}",
                   ignored=self.loader["unknown_keys"].get("refused") is False)
        out.pop("value")
        return out

    def _other_versions(self, pattern: str, name: str) -> list:
        """The other versions of this framework whose same table has this key (renamed or removed since)."""
        out = []
        for framework, version in available():
            if framework == self.framework and version != self.version:
                try:
                    if name in load(framework, version).keys(pattern):
                        out.append(version)
                except (OSError, ValueError, SchemaError):
                    continue
        return out

    def _qn(self, pattern: str, class_name: str) -> str:
        for qn in self.data["tables"].get(pattern, {}).get("classes", []):
            if self.data["classes"][qn]["name"] == class_name:
                return qn
        return class_name


class _Plan:
    """A table's keys, its fast type tests, its class and the fields its checks read (None: no checks)."""

    __slots__ = ("keys", "fast", "exact", "qn", "class_name", "check_names", "ambiguous")

    def __init__(self, keys: dict, fast: dict, qn: str, class_name: str, check_names, ambiguous: bool):
        self.keys, self.fast, self.qn, self.class_name = keys, fast, qn, class_name
        self.check_names, self.ambiguous = check_names, ambiguous
        # name -> the one class its fast test passes (the exact type tests: int, float, bool, str)
        self.exact = {name: _EXACT[test] for name, test in fast.items() if test in _EXACT}


def _is_int(v) -> bool:
    return type(v) is int


def _is_float(v) -> bool:
    return type(v) is float


def _is_bool(v) -> bool:
    return type(v) is bool


def _is_str(v) -> bool:
    return type(v) is str


_FAST = {"int": _is_int, "float": _is_float, "bool": _is_bool, "str": _is_str}
_EXACT = {_is_int: int, _is_float: float, _is_bool: bool, _is_str: str}


def _fast_test(typ: dict, model: str):
    """A test that is true only for values ``_judge`` passes without a word (None: always judge).

    Exact type tests, so a subclass (bool for int), an int for a float, or anything unusual still goes
    through the full verdict; only the plain, right value skips it."""
    kind = typ["kind"]
    if kind in _FAST:
        return _FAST[kind]
    if kind == "literal" and typ["values"] and all(type(v) is str for v in typ["values"]):
        allowed = frozenset(typ["values"])
        return lambda v: type(v) is str and v in allowed
    if kind == "optional":
        inner = _fast_test(typ["of"], model)
        if inner is not None:
            return lambda v: v is None or inner(v)
    if kind in ("any", "other", "initvar", "classvar"):
        return lambda v: True
    return None


_WALKED_MAX = 2048  # sections remembered per schema (a long-lived process checks many configs)


def _fresh(value):
    """A copy of a problem (dicts and lists copied all the way down), so no caller changes the remembered one."""
    cls = value.__class__
    if cls is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if cls is list:
        return [_fresh(v) for v in value]
    return value


class _Context:
    types = None
    unknown_names: dict = {}
    skip = frozenset()

    def __init__(self, schema: Schema, origin: str, data: dict):
        self.schema, self.origin = schema, origin
        self.framework = schema.framework
        self.word = _FRAMEWORK_WORD.get(schema.framework, schema.framework)
        self.model = schema.loader["types"]["model"]
        job = data.get("job") if isinstance(data, dict) else None
        custom = job.get("custom_config_module") if isinstance(job, dict) else None
        self.custom_module = custom if isinstance(custom, str) and custom else None


def _pattern(path: str) -> str:
    """``data.datasets[2].path`` -> ``data.datasets[].path`` (tables are keyed by pattern)."""
    out, depth = [], 0
    for ch in path:
        if ch == "[":
            depth += 1
            out.append("[")
        elif ch == "]":
            depth -= 1
            out.append("]")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


# ----------------------------------------------------------------------------- values

_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "bytes": "bytes",
          "list": "an array", "tuple": "an array", "dict": "a table", "dataclass": "a table", "any": "any value",
          "none": "nothing (None)"}


def _type_word(raw) -> str:
    if isinstance(raw, bool):
        return "boolean"
    if isinstance(raw, int):
        return "integer"
    if isinstance(raw, float):
        return "float"
    if isinstance(raw, str):
        return "string"
    if isinstance(raw, list):
        return "array"
    if isinstance(raw, dict):
        return "table"
    return type(raw).__name__


def _expected(typ: dict) -> str:
    kind = typ["kind"]
    if kind in ("literal", "enum"):
        return "one of " + ", ".join(repr(v) for v in typ["values"])
    if kind == "optional":
        return _expected(typ["of"])
    if kind == "union":
        return " or ".join(_expected(t) for t in typ["of"])
    if kind == "list":
        inner = typ["of"]["kind"]
        return "an array" + (f" of {_WORDS[inner].split(' ', 1)[-1]}s" if inner in ("int", "float", "str", "bool") else "")
    return _WORDS.get(kind, typ.get("text", kind))


def _show(raw) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str):
        return '"' + raw.replace('"', '\\"') + '"'
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _matches(typ: dict, raw) -> bool:
    """Python's view: is ``raw`` of this type (an int for a float field counts)."""
    kind = typ["kind"]
    if kind in ("any", "other", "initvar", "classvar"):
        return True
    if kind == "none":
        return raw is None
    if kind == "optional":
        return raw is None or _matches(typ["of"], raw)
    if kind == "union":
        return any(_matches(t, raw) for t in typ["of"])
    if kind == "int":
        return isinstance(raw, int) and not isinstance(raw, bool)
    if kind == "float":
        return isinstance(raw, (int, float)) and not isinstance(raw, bool)
    if kind == "bool":
        return isinstance(raw, bool)
    if kind in ("str", "bytes"):
        return isinstance(raw, str)
    if kind in ("literal", "enum"):
        return any(raw == v and type(raw) is type(v) for v in typ["values"])
    if kind == "list":
        return isinstance(raw, list) and all(_matches(typ["of"], x) for x in raw)
    if kind == "tuple":
        if not isinstance(raw, (list, tuple)):
            return False
        if typ.get("variadic"):
            return all(_matches(typ["of"][0], x) for x in raw)
        return len(raw) == len(typ["of"]) and all(_matches(t, x) for t, x in zip(typ["of"], raw))
    if kind in ("dict", "dataclass"):
        return isinstance(raw, dict)
    return True


def _judge(ctx, key: dict, path: str, name, raw) -> dict | None:
    """The type verdict for one value: None when the framework takes it as it is."""
    typ = key["type"]
    if ctx.origin == "cli":
        verdict = _cli(ctx, typ, raw)
    elif ctx.model == "kempnerforge":
        verdict = _kempnerforge(typ, raw)
    else:
        verdict = _keep(ctx, typ, raw)
    if verdict is None:
        return None
    level, refused, effective, does = verdict
    kind = "invalid-value" if _is_enum(typ) and isinstance(raw, str) else "wrong-type"
    out = _problem(ctx, kind, path.rpartition(".")[0], name, raw, level, refused, does, expected=_expected(typ),
                   source=key["source"])
    if effective is not _UNSET:
        out["effective"] = effective
    return out


def _read_at_load(ctx, problem: dict, raw, fact: dict) -> None:
    """The loader itself uses the value right away (torchtitan's ConfigManager on paths and module names)."""
    if isinstance(raw, str) or (fact["ints_pass"] and isinstance(raw, int) and not isinstance(raw, bool)):
        return  # an int is a file descriptor to os.path.exists: it may pass
    if fact["falsy_pass"] and not raw:
        return
    problem.update(level="error", refused=True, source=fact["source"])
    problem["framework"] = (f"{ctx.word} refuses the config at load: its config manager uses it as a string at "
                            f"{fact['source']} and fails on the {_type_word(raw)}")
    problem["message"] = f"{problem['key']} = {problem['value']}: expected {problem['expected']}; {problem['framework']}"
    problem.pop("effective", None)


def _is_enum(typ: dict) -> bool:
    return typ["kind"] in ("literal", "enum") or (typ["kind"] == "optional" and typ["of"]["kind"] in ("literal", "enum"))


_UNSET = object()


# ----------------------------------------------------------------------------- __post_init__, evaluated

class _Unknown(Exception):
    """The expression needs something meshlint does not know (a method, a class, a runtime value)."""


_UNKNOWN = object()
_ABSENT = object()  # a name a _Section holds no value for
_BUILTINS = {"len": len, "set": set, "sorted": sorted, "list": list, "tuple": tuple, "min": min, "max": max,
             "abs": abs}


class _Section:
    """A table as the framework's ``self`` sees it: written values over the schema's defaults.

    The prewritten texts read fields with ``V.get(name)`` (never ``V.name``), so the class has no ``__getattr__``:
    with one, Python cannot specialise any attribute read on a section (``V.get``, ``self.written``), which cost
    a first run ~1.5 M instructions."""

    def __init__(self, schema: Schema, pattern: str, table: dict, keys: dict, base: dict | None = None):
        self.schema, self.pattern, self.keys = schema, pattern, keys
        self.written = {k: v for k, v in table.items() if k in keys} if table else {}
        self.base = base or {}   # the default instance's values (KempnerForge), under what the file writes
        self.assigned: dict = {}

    def get(self, name: str):
        if name in self.assigned:  # what __post_init__ set, over what the file writes, over the default instance
            value = self.assigned[name]
        elif name in self.written:
            value = self.written[name]
        elif name in self.base:
            value = self.base[name]
        else:
            value = _ABSENT
        if value is not _ABSENT:
            if value is _UNKNOWN:
                raise _Unknown(name)
            cls = value.__class__
            if cls is int or cls is str or cls is float or cls is bool or value is None:
                return value  # what _wrap gives a plain value
            return self._wrap(name, value)
        key = self.keys.get(name)
        if key is None:
            raise _Unknown(name)  # a property or method, not a field
        if "default" in key:
            return self._wrap(name, key["default"])
        if "default_factory" in key and "table" in key:
            return _Section(self.schema, key["table"], {}, self.schema.keys(key["table"], key["default_factory"]))
        raise _Unknown(name)

    def _unknown(self, *_):
        raise _Unknown("section")  # a whole section used as a value: meshlint cannot follow it

    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __getitem__ = _unknown
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __mod__ = __rmod__ = _unknown
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __neg__ = __pos__ = __len__ = __iter__ = _unknown
    __hash__ = object.__hash__

    def __eq__(self, other):
        if other is self:
            return True
        raise _Unknown("section")

    __ne__ = lambda self, other: not self.__eq__(other)  # noqa: E731

    def _wrap(self, name: str, value):
        key = self.keys.get(name)
        if isinstance(value, dict) and key is not None and "table" in key and not key["table"].endswith("[]"):
            return _Section(self.schema, key["table"], value, self.schema.keys(key["table"]))
        if isinstance(value, list) and key is not None and key["type"]["kind"] == "tuple":
            return tuple(value)
        return value


def _value(text: str, values: _Section, local: dict):
    fn = _compiled(text)
    if fn is None:
        return _UNKNOWN
    try:
        return fn(values, local)
    except Exception:  # noqa: BLE001 - _Unknown, or the framework would fail here too: the check reading it says so
        return _UNKNOWN


def _holds(conditions, values: _Section, local: dict):
    """(True/False/None/"raises", the loop variables that made it hold, the exception text).

    ``conditions``: condition texts, or conditions already prepared by :func:`_cond`. ``local`` is read, never
    changed (a loop binds its names in a copy), so callers hand in their own."""
    if not conditions:
        return True, local, None
    first, rest = conditions[0], conditions[1:]
    header = first if first.__class__ is str else None
    if first.__class__ is str:
        first = _CONDS.get(first) or _cond(first)
    if first[0] == "for":
        _, target, fn = first
        if fn is None:
            return None, local, None
        try:
            items = fn(values, local)
        except _Unknown:
            return None, local, None
        except Exception as exc:  # noqa: BLE001
            return "raises", local, f"{type(exc).__name__}: {exc}"
        verdict = False
        for index, item in enumerate(items if isinstance(items, (list, tuple)) else []):
            bound = _bind(target, item, dict(local))
            if bound is None:
                return None, local, None
            state, where, error = _holds(rest, values, bound)
            if state is True or state == "raises":
                if header is not None:  # which item of which loop: the field to point at (_loop_culprits)
                    where = {**where, _LOOP_ITEMS: ((header, index),) + where.get(_LOOP_ITEMS, ())}
                return state, where, error
            if state is None:
                verdict = None
        return verdict, local, None
    fn = first[1]
    if fn is None:
        return None, local, None
    try:
        result = fn(values, local)
    except (_Unknown, RecursionError):
        return None, local, None
    except Exception as exc:  # noqa: BLE001 - the check itself raises (a list compared with an int)
        return "raises", local, f"{type(exc).__name__}: {exc}"
    if not result:
        return False, local, None
    return _holds(rest, values, local)


_CONDS: dict = {}


# The words people use for each parallelism degree, across frameworks (Megatron's *_model_parallel_size,
# torchtitan's *_parallel_degree, KempnerForge's short names): pp_degree is pp, tensor_parallel_size is tp.
_DEGREE_WORDS = {
    "tp": "tp", "tensor": "tp", "tensor_model": "tp", "mp": "tp",
    "pp": "pp", "pipeline": "pp", "pipeline_model": "pp", "pipe": "pp",
    "cp": "cp", "context": "cp",
    "ep": "ep", "expert": "ep", "expert_model": "ep",
    "etp": "etp", "expert_tensor": "etp",
    "dp_shard": "dp_shard", "fsdp": "dp_shard", "shard": "dp_shard", "data_shard": "dp_shard", "dp": "dp_shard",
    "data_parallel_shard": "dp_shard", "dp_shards": "dp_shard",
    "dp_replicate": "dp_replicate", "replicate": "dp_replicate", "ddp": "dp_replicate", "hsdp": "dp_replicate",
    "dp_rep": "dp_replicate", "data_replicate": "dp_replicate", "data_parallel_replicate": "dp_replicate",
}
_DEGREE_SUFFIXES = ("_model_parallel_size", "_parallel_degree", "_parallel_size", "_parallelism", "_parallel",
                    "_degree", "_size", "_world_size", "_dim", "_ways", "_way")


def degree_word(word: str) -> str | None:
    """The parallelism degree a key name means (``pp_degree`` -> pp), or None when it names none."""
    w = word.lower().replace("-", "_")
    if w.startswith("num_"):
        w = w[4:]
    for suffix in _DEGREE_SUFFIXES:
        if w.endswith(suffix) and len(w) > len(suffix):
            w = w[: -len(suffix)]
            break
    return _DEGREE_WORDS.get(w)


def same_degree(word: str, names) -> list:
    """[the one name in ``names`` for the degree ``word`` means], or []: the did-you-mean a spelling distance
    cannot find (pp_degree is 7 letters from pp)."""
    meant = degree_word(word)
    if meant is None:
        return []
    hits = [n for n in names if n != word and degree_word(n) == meant]
    return hits[:1] if len(hits) == 1 else []


_LOOP_ITEMS = "\0loop items"  # a key no Python name can be: (for-header text, index of the item that failed)


def _loop_culprits(local: dict) -> frozenset | None:
    """The fields read by the item a failing ``for`` check stopped at, when its iterable is a literal list or
    tuple (``for name, val in [("tp", self.tp), ("cp", self.cp)]``: cp = 0 fails, so point at cp, not tp)."""
    for header, index in local.get(_LOOP_ITEMS, ()):
        loop = _parsed(header)
        elts = getattr(getattr(loop, "iter", None), "elts", None)
        if elts is not None and index < len(elts):
            names = _self_names(_unparse(elts[index]))
            if names:
                return frozenset(names)
    return None


def _culprits(condition: str, values: "_Section", local: dict) -> frozenset | None:
    """The fields read by the first operand of a failing ``a or b or ...`` check that holds on its own (the
    value to point at), or None when the check is no such disjunction. Worked out only for a failing check."""
    if " or " not in condition:
        return None
    import ast

    try:
        node = ast.parse(condition, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.BoolOp) or not isinstance(node.op, ast.Or):
        return None
    for operand in node.values:
        text = ast.unparse(operand)
        if _holds((text,), values, dict(local))[0] is True:
            return frozenset(_self_names(text))
    return None


def _cond(text: str) -> tuple:
    """One condition ready to evaluate: ("if", f) or ("for", loop target, f of the iterable); f None when
    meshlint does not evaluate it. Prepared once per process."""
    out = _CONDS.get(text)
    if out is None:
        quick = _for_shape(text) if text.startswith("for ") else None
        if quick is not None:
            out = ("for", quick[0], _COMPILED[quick[1]])
        elif text.startswith("for "):
            loop = _parsed(text)
            out = ("for", loop.target if loop is not None else None,
                   _compiled(_iter_text(text, loop)) if loop is not None else None)
        else:
            out = ("if", _compiled(text))
        _CONDS[text] = out
    return out


class _Name:
    """A ``for`` target's name, read by _bind as the parser's ``Name`` node is (``id``)."""

    __slots__ = ("id",)

    def __init__(self, name: str):
        self.id = name


class _Tuple:
    """A ``for`` target's ``(a, b)``, read by _bind as the parser's ``Tuple`` node is (``elts``)."""

    __slots__ = ("elts",)

    def __init__(self, elts: list):
        self.elts = elts


_Name.__name__, _Tuple.__name__ = "Name", "Tuple"  # _bind dispatches on the node class's name


def _for_shape(text: str) -> tuple | None:
    """(target, iterable text) of ``for a in ...`` / ``for (a, b) in ...`` whose iterable is a prewritten
    text, read without the parser (importing _ast costs ~10 M instructions); None for any other header."""
    target, sep, iterable = text[4:].partition(" in ")
    if not sep or iterable not in _COMPILED or iterable != iterable.strip() or "\n" in iterable:
        return None
    if _plain_name(target):
        return _Name(target), iterable
    if target[:1] == "(" and target[-1:] == ")":
        names = target[1:-1].split(", ")
        if len(names) > 1 and all(map(_plain_name, names)):
            return _Tuple([_Name(n) for n in names]), iterable
    return None


_PARSED: dict = {}
_COMPILED: dict = {}


def compiled_module(framework: str, version: str) -> str:
    """The module holding a schema's texts compiled ahead of time (meshlint.generate.schema_compiled)."""
    name = "".join(c if c.isalnum() else "_" for c in f"{framework}_{version}")
    return "meshlint.schema_compiled." + name


def _prewritten(framework: str, version: str):
    """The schema's prewritten module, or None: its ``COMPILED`` (text -> function, or None: not evaluated, for every
    text of the schema; Python's own bytecode cache makes that far cheaper than parsing and compiling each text
    here) and ``DATA`` (the schema file's content). tests/test_schema_generated.py checks each module is what its
    schema gives now."""
    from meshlint.modules import import_module

    try:
        return import_module(compiled_module(framework, version))
    except ImportError:
        return None


def _parsed(text: str):
    """A ``for`` header of a condition, parsed once per process (None when it does not parse)."""
    if text not in _PARSED:
        import _ast  # ast.parse is this compile() call; the ast module itself costs a cold run ~3 ms

        try:
            _PARSED[text] = compile(text + ": pass", "<unknown>", "exec", _ast.PyCF_ONLY_AST).body[0]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            _PARSED[text] = None
    return _PARSED[text]


def _iter_text(text: str, loop) -> str:
    """The text of a ``for`` header's iterable as the schema's prewritten functions know it: the header's own
    slice when it is one of them (no ``ast`` import on a cold run), else ``ast.unparse`` of the node."""
    node = loop.iter
    if getattr(node, "lineno", 0) == getattr(node, "end_lineno", -1) == 1:
        part = text.encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
        if part in _COMPILED:
            return part
    return _unparse(node)


def _unparse(node) -> str:
    import ast

    return ast.unparse(node)


def _compiled(text: str):
    """``text`` (a condition or value from the generated schema) as a function ``f(values, local)``: the
    prewritten one (meshlint/schema_compiled/), else translated and compiled here, once; None when it uses something meshlint does not evaluate (a method, a module, a power, a lambda...).
    Operations run natively, except ``+ * %`` (guarded against huge repeats and format strings) and name,
    attribute and call lookups (``self.x`` reads the section; anything unknown raises _Unknown)."""
    if text in _COMPILED:
        return _COMPILED[text]
    translated = translated_source(text)
    if translated is None:
        fn = None
    else:
        source, consts = translated
        code = compile(f"lambda V, L: {source}", "<meshlint schema check>", "eval")
        fn = eval(code, {"__builtins__": {}, "K": consts, **HELPERS})  # noqa: S307
    _COMPILED[text] = fn
    return fn


def translated_source(text: str):
    """``(python source over V, L, K and HELPERS, the constants K holds)`` for a condition or value text, or None
    when it uses something meshlint does not evaluate. meshlint.generate.schema_compiled writes these ahead of
    time for every text of a generated schema (meshlint/schema_compiled/), so a run compiles none of them."""
    try:
        import ast

        consts: list = []
        source = _translate(ast.parse(text, mode="eval").body, consts)
    except (SyntaxError, _Untranslatable, ValueError, RecursionError, MemoryError):
        return None
    return source, tuple(consts)


class _Untranslatable(Exception):
    """An expression node meshlint's evaluator does not handle."""


_CMP_OPS = {"Gt": ">", "GtE": ">=", "Lt": "<", "LtE": "<=", "Eq": "==", "NotEq": "!=", "Is": "is", "IsNot": "is not",
            "In": "in", "NotIn": "not in"}


def _translate(node, consts: list) -> str:
    """Python source for ``node`` over the helpers of _compiled (a small whitelist of node kinds)."""
    import ast

    t = lambda n: _translate(n, consts)  # noqa: E731
    if isinstance(node, ast.Constant):
        consts.append(node.value)
        return f"K[{len(consts) - 1}]"
    if isinstance(node, ast.Name):
        return f"_L(L, {node.id!r})"
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"V.get({node.attr!r})"
        return f"_A({t(node.value)}, {node.attr!r})"
    if isinstance(node, ast.BoolOp):
        op = " and " if isinstance(node.op, ast.And) else " or "
        return "(" + op.join(t(v) for v in node.values) + ")"
    if isinstance(node, ast.UnaryOp):
        op = {ast.Not: "not ", ast.USub: "-", ast.UAdd: "+"}.get(type(node.op))
        if op is None:
            raise _Untranslatable("unary")
        return f"({op}{t(node.operand)})"
    if isinstance(node, ast.Compare):
        parts = [t(node.left)]
        for op, comp in zip(node.ops, node.comparators):
            parts += [_CMP_OPS[type(op).__name__], t(comp)]
        return "(" + " ".join(parts) + ")"
    if isinstance(node, ast.BinOp):
        helper = {ast.Add: "_add", ast.Mult: "_mul", ast.Mod: "_mod"}.get(type(node.op))
        if helper:
            return f"{helper}({t(node.left)}, {t(node.right)})"
        op = {ast.Sub: "-", ast.FloorDiv: "//", ast.Div: "/"}.get(type(node.op))
        if op is None:
            raise _Untranslatable("binary")
        return f"({t(node.left)} {op} {t(node.right)})"
    if isinstance(node, ast.Subscript):
        return f"({t(node.value)})[{t(node.slice)}]"
    if isinstance(node, ast.Tuple):
        return "(" + "".join(t(e) + ", " for e in node.elts) + ")"
    if isinstance(node, ast.List):
        return "[" + ", ".join(t(e) for e in node.elts) + "]"
    if isinstance(node, ast.Set):
        return "{" + ", ".join(t(e) for e in node.elts) + "}"
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return "{" + ", ".join(f"{t(k)}: {t(v)}" for k, v in zip(node.keys, node.values)) + "}"
    if isinstance(node, ast.Call) and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
        if isinstance(node.func, ast.Name) and node.func.id in _BUILTINS:
            return f"_call({node.func.id!r}, " + "".join(t(a) + ", " for a in node.args) + ")"
        if isinstance(node.func, ast.Attribute) and node.func.attr == "keys" and not node.args:
            return f"_keys({t(node.func.value)})"
        if isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS:
            return f"_meth({t(node.func.value)}, {node.func.attr!r}, " + "".join(t(a) + ", " for a in node.args) + ")"
    raise _Untranslatable(type(node).__name__)


def _h_local(local: dict, name: str):
    if name in local:
        return local[name]
    raise _Unknown(name)


def _h_attr(base, name: str):
    if isinstance(base, _Section):
        return base.get(name)
    if base is None:
        return getattr(base, name)  # AttributeError, as in the framework
    raise _Unknown(name)


def _h_size(a, b) -> None:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and abs(n) > 1000:
            raise _Unknown("size")  # no huge strings or lists from a repeat


def _h_add(a, b):
    return a + b


def _h_mul(a, b):
    _h_size(a, b)
    return a * b


def _h_mod(a, b):
    if isinstance(a, (str, bytes)):
        raise _Unknown("format")  # '%' on a string formats it: not evaluated
    return a % b


def _h_call(name: str, *args):
    if any(isinstance(a, _Section) for a in args):
        raise _Unknown("section")
    return _BUILTINS[name](*args)


# pure, linear-time str methods the frameworks' checks call on a field (``self.folder.strip()``)
STR_METHODS = frozenset(("strip", "lstrip", "rstrip", "lower", "upper", "startswith", "endswith"))
_NATIVE = (int, float, bool, type(None), list, tuple, dict, set)


def _h_meth(base, name: str, *args):
    """A whitelisted str method on a value: computed on a string; on a number, None or a list it raises the
    AttributeError the framework's own line raises; anything else (a section, an unknown) is not evaluated."""
    if isinstance(base, str) and all(isinstance(a, (str, tuple)) for a in args):
        return getattr(base, name)(*args)
    if type(base) in _NATIVE and not hasattr(base, name):
        return getattr(base, name)  # AttributeError: 'int' object has no attribute 'strip'
    raise _Unknown(name)


def _h_keys(base):
    if isinstance(base, dict):
        return base.keys()
    raise _Unknown("keys")


# the names a translated text calls (the prewritten modules import them under these names too)
HELPERS = {"_L": _h_local, "_A": _h_attr, "_add": _h_add, "_mul": _h_mul, "_mod": _h_mod, "_call": _h_call,
           "_keys": _h_keys, "_meth": _h_meth}


def _bind(target, item, local: dict):
    kind = type(target).__name__
    if kind == "Name":
        local[target.id] = item
        return local
    if kind in ("Tuple", "List") and isinstance(item, (list, tuple)) and len(item) == len(target.elts):
        for t, v in zip(target.elts, item):
            if _bind(t, v, local) is None:
                return None
        return local
    return None


def _deepest(step: dict, values: "_Section"):
    """("section.key", value) of the first ``self.section.key`` the check reads that the config writes."""
    text = step["condition"] + " " + " ".join(step.get("when", []))
    for section, key in fastre.compile(r"\bself\.([A-Za-z_]\w*)\.([A-Za-z_]\w*)").findall(text):
        table = values.written.get(section)
        if isinstance(table, dict) and key in table:
            return f"{section}.{key}", table[key]
    return None


def _seed(step: dict, members) -> tuple:
    """``self.x not in registered`` / ``not in registry.list_x()``: test against the values the generator
    resolved (the registered names), binding a local name to them so the message can show them."""
    if members is None:
        return step["condition"], {}
    shape = _seed_shape(step["condition"])
    if shape is not None:  # the usual shapes, read without the parser: importing _ast costs ~10 M instructions
        attr, name = shape
        local = {"__members__": list(members)}
        if name is not None:
            local[name] = list(members)
        return f"self.{attr} not in __members__", local
    # ast.parse(text, mode="eval") is this compile() call; the node classes are _ast's own (ast.py re-exports
    # them): a check of the common path then never imports ast.py (~3 ms)
    import _ast

    try:
        node = compile(step["condition"], "<unknown>", "eval", _ast.PyCF_ONLY_AST).body
    except SyntaxError:
        return step["condition"], {}
    if not (isinstance(node, _ast.Compare) and isinstance(node.left, _ast.Attribute)):
        return step["condition"], {}
    local = {"__members__": list(members)}
    if isinstance(node.comparators[0], _ast.Name):
        local[node.comparators[0].id] = list(members)
    return f"self.{node.left.attr} not in __members__", local


def _seed_shape(condition: str) -> tuple | None:
    """(attr, name) of ``self.<attr> not in <name>`` - name None where the right side is a call
    ``a.b()`` or a tuple or set of plain 'strings' - exactly as _seed's parse reads them; None for any other text."""
    left, sep, right = condition.partition(" not in ")
    if not sep or left[:5] != "self." or not _plain_name(left[5:]):
        return None
    if _plain_name(right):
        return left[5:], right
    if right.endswith("()") and all(map(_plain_name, right[:-2].split("."))):
        return left[5:], None
    if (right[:2], right[-2:]) in (("('", "')"), ("{'", "'}")):
        items = right[1:-1].split(", ")
        if all(len(i) >= 2 and i[0] == i[-1] == "'" and i[1:-1].isprintable() and not any(c in i[1:-1] for c in "'\\")
               for i in items):
            return left[5:], None
    return None


# Python's keywords (keyword.kwlist, the same from 3.7 on; soft keywords such as ``match`` are names here): a set,
# not an import of ``keyword``, which costs a first run ~0.5 M instructions (tests/test_schema_generated.py compares them)
KEYWORDS = frozenset((
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"))


def _plain_name(text: str) -> bool:
    """An ASCII identifier that is not a keyword: the parser reads it as a Name (or an attribute) as written."""
    return text.isascii() and text.isidentifier() and text not in KEYWORDS


# text -> the ``self.name`` fields it reads, in order (a tuple): the schema's own texts come prewritten
# (meshlint/schema_compiled/: SELF_NAMES), since finding them with fastre cost a first run ~2 M instructions
_NAMES: dict = {}


def _self_field():  # ``self.name`` in a check's text
    return fastre.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)")


def self_fields(text: str) -> tuple:
    """The ``self.name`` fields ``text`` reads, in order, with repeats (what the generator writes as SELF_NAMES)."""
    found = _NAMES.get(text)
    if found is None:
        found = _NAMES[text] = tuple(_self_field().findall(text))
    return found


def _self_names(text: str) -> set:
    return set(self_fields(text))


def _self_order(step: dict) -> list:
    """The fields a check reads, in the order its condition names them (condition first)."""
    found = self_fields(step["condition"])
    for text in step.get("when", ()):
        found += self_fields(text)
    return list(dict.fromkeys(found))


def _fill(message: str, values: _Section, local: dict) -> str:
    """A message template with f-string holes filled in where meshlint can (``...`` where it cannot)."""
    def hole(m):
        expr, conv = m.group(1), m.group(2)
        fn = _compiled(expr)
        try:
            value = fn(values, local) if fn is not None else _UNKNOWN
        except Exception:  # noqa: BLE001 - a hole meshlint cannot fill
            return "..."
        if value is _UNKNOWN:
            return "..."
        if isinstance(value, _Section):
            return "..."
        return repr(value) if conv == "r" else str(value)

    return fastre.compile(r"\{([^{}!:]+)(?:!([rsa]))?(?::[^{}]*)?\}").sub(hole, message)


def _kempnerforge(typ: dict, raw):
    """KempnerForge's ``_coerce_value``: (level, refused, effective, what it does) or None when fine."""
    kind = typ["kind"]
    word = "KempnerForge"
    if kind == "optional":
        if raw is None:
            return None
        inner = typ["of"]
        if inner["kind"] == "union":  # several types: kept as given
            return None if _matches(inner, raw) else ("error", False, raw, f"{word} keeps the {_type_word(raw)} unconverted")
        return _kempnerforge(inner, raw)
    if kind == "union":
        return None if _matches(typ, raw) else ("error", False, raw, f"{word} keeps the {_type_word(raw)} unconverted")
    if kind == "literal":
        if raw in typ["values"]:
            return None
        return ("error", True, _UNSET, f"{word} refuses the whole config: ValueError: Value {raw!r} not in allowed "
                                       f"Literal values: {tuple(typ['values'])!r}")
    if kind == "enum":
        if isinstance(raw, str) and raw in typ["values"]:
            return None
        enum = typ["class"].rsplit(".", 1)[-1]
        return ("error", True, _UNSET, f"{word} refuses the whole config: ValueError: {raw!r} is not a valid {enum}")
    if kind == "tuple":
        if isinstance(raw, (list, tuple)):
            if not typ.get("variadic") and len(raw) != len(typ["of"]):
                return ("warning", False, list(raw), f"{word} makes it a tuple of {len(raw)} (it expects "
                                                     f"{len(typ['of'])}; the length is not checked)")
            return None if _matches(typ, raw) else ("error", False, list(raw),
                                                    f"{word} makes it a tuple but converts no element")
        return ("error", False, raw, f"{word} keeps the {_type_word(raw)} unconverted")
    if kind == "list":
        if isinstance(raw, list):
            return None if _matches(typ, raw) else ("warning", False, raw, f"{word} keeps the elements unconverted")
        if isinstance(raw, dict):
            return ("error", False, [raw], f"{word} wraps the table in a one-element list")
        return ("info", False, [raw], f"{word} wraps it in a one-element list: [{_show(raw)}]")
    if kind == "bool":
        if isinstance(raw, bool):
            return None
        if isinstance(raw, str):
            value = raw.lower() in ("true", "1", "yes")
            exact = raw.lower() in ("true", "1", "yes", "false", "0", "no")
            return ("warning", False, value, f"{word} reads the string as {str(value).lower()}"
                    + ("" if exact else " (only 'true', '1' and 'yes' mean true)"))
        try:
            value = bool(raw)
        except Exception:  # noqa: BLE001 - an odd object; the framework would fail the same way
            return ("error", True, _UNSET, f"{word} fails converting it to a boolean")
        return ("warning", False, value, f"{word} converts it with bool(): {str(value).lower()}")
    if kind == "int":
        if isinstance(raw, bool):
            return ("warning", False, raw, f"{word} keeps the boolean, which counts as {int(raw)}")
        if isinstance(raw, int):
            return None
        if isinstance(raw, str):
            try:
                value = int(raw)
            except ValueError:
                return ("error", True, _UNSET, f"{word} refuses the whole config: ValueError: invalid literal for "
                                               f"int() with base 10: {raw!r}")
            return ("warning", False, value, f"{word} converts the string to {value}")
        if isinstance(raw, float):
            if raw != raw or raw in (float("inf"), float("-inf")):
                return ("error", True, _UNSET, f"{word} refuses the whole config: int({raw}) fails")
            value = int(raw)
            if value == raw:
                return ("info", False, value, f"{word} converts it to {value}")
            return ("warning", False, value, f"{word} silently truncates it to {value}")
        return ("error", False, raw, f"{word} keeps the {_type_word(raw)} unconverted")
    if kind == "float":
        if isinstance(raw, float):
            return None
        if isinstance(raw, bool):
            return ("warning", False, float(raw), f"{word} converts the boolean to {float(raw)}")
        if isinstance(raw, int):
            return None if abs(raw) < 2 ** 53 else ("info", False, float(raw), f"{word} converts it to {float(raw)}")
        if isinstance(raw, str):
            try:
                value = float(raw)
            except ValueError:
                return ("error", True, _UNSET, f"{word} refuses the whole config: ValueError: could not convert "
                                               f"string to float: {raw!r}")
            return ("warning", False, value, f"{word} converts the string to {value}")
        return ("error", False, raw, f"{word} keeps the {_type_word(raw)} unconverted")
    if _matches(typ, raw):
        return None
    return ("error", False, raw, f"{word} keeps the {_type_word(raw)} unconverted")


def _keep(ctx, typ: dict, raw):
    """torchtitan (TOML and registry): nothing is converted; tyro only warns."""
    if _matches(typ, raw):
        return None
    word = ctx.word
    kind = typ["kind"] if typ["kind"] != "optional" else typ["of"]["kind"]
    if kind == "int" and isinstance(raw, bool):
        return ("warning", False, raw, f"{word} keeps the boolean, which counts as {int(raw)}")
    if kind == "float" and isinstance(raw, bool):
        return ("warning", False, raw, f"{word} keeps the boolean, which counts as {int(raw)}")
    if kind in ("literal", "enum"):
        does = (f"{word} keeps it (tyro only warns that the value does not match the Literal); code that compares "
                "it with the allowed values then fails or falls back")
        return ("error", False, raw, does)
    does = (f"{word} keeps the {_type_word(raw)} unconverted (tyro only warns that the value does not match the "
            "annotation); it fails or is misread where it is used")
    return ("error", False, raw, does)


def _cli(ctx, typ: dict, raw):
    """A value as typed on the command line."""
    if not isinstance(raw, str):
        return _kempnerforge(typ, raw) if ctx.model == "kempnerforge" else _keep(ctx, typ, raw)
    if ctx.model == "kempnerforge":
        import ast

        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = raw
        return _kempnerforge(typ, value)
    kind = typ["kind"] if typ["kind"] != "optional" else typ["of"]["kind"]
    inner = typ if typ["kind"] != "optional" else typ["of"]
    if kind in ("literal", "enum"):
        if raw in [str(v) for v in inner["values"]]:
            return None
        return ("error", True, _UNSET, f"torchtitan's command line (tyro) exits with status 2: invalid choice {raw!r}; "
                                       f"expected one of {tuple(inner['values'])!r}")
    convert = {"int": int, "float": float}.get(kind)
    if convert is not None:
        try:
            convert(raw)
        except ValueError:
            return ("error", True, _UNSET, f"torchtitan's command line (tyro) exits with status 2: Error parsing the "
                                           f"value: invalid literal for {kind}(): {raw!r}")
        return None
    if kind == "bool":
        return ("error", True, _UNSET, f"torchtitan's command line (tyro) exits with status 2: booleans are flags "
                                       f"(--x / --no-x), so {raw!r} is an unrecognized argument")
    return None


def _problem(ctx, kind: str, where: str, name, raw, level: str, refused: bool, does: str, expected: str = "",
             source: str | None = None) -> dict:
    text = str(name)
    key = f"{where}.{text}" if where else text
    shown = _show(raw)
    if kind == "unknown-key":
        message = ""
    elif kind == "not-a-table":
        message = f"{key} must be {expected}, not {_type_word(raw)}: {does}"
    elif kind == "unknown-variant":
        message = f"{key} = {shown} is not an architecture {ctx.word} knows: {does}"
    else:
        message = f"{key} = {shown}: expected {expected}; {does}"
    return {"kind": kind, "key": key, "section": where, "name": text, "level": level, "refused": refused,
            "framework": does, "expected": expected, "value": shown, "source": source, "message": message}
