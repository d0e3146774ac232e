"""The raise/assert sites of a framework's start-up: which files to read per version (``VERSIONS``), and the
``ast`` walk that lists each site with its function, kind, condition and message."""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path


# ----------------------------------------------------------------------------- what to read, per version

VERSIONS = {
    "kempnerforge": {
        "title": "KempnerForge 5666d0d",
        "commit": "5666d0d",
        "package": "kempnerforge",
        "files": ["scripts/train.py", "kempnerforge/config/*.py", "kempnerforge/distributed/*.py",
                  "kempnerforge/model/*.py", "kempnerforge/data/*.py", "kempnerforge/training/*.py",
                  "kempnerforge/checkpoint/*.py"],
        "skip": ["kempnerforge/model/generate.py"],  # inference only
    },
    "torchtitan-0.2.x": {
        "title": "torchtitan v0.2.x (TOML era, 9810191bb^ = 0.2.2's code)",
        "commit": "9810191bb^",
        "package": "torchtitan",
        "files": ["torchtitan/train.py", "torchtitan/config/*.py", "torchtitan/distributed/**/*.py",
                  "torchtitan/components/**/*.py", "torchtitan/models/**/*.py", "torchtitan/protocols/*.py",
                  "torchtitan/datasets/**/*.py", "torchtitan/hf_datasets/**/*.py", "torchtitan/tools/utils.py"],
        "skip": ["torchtitan/models/flux/inference/*", "torchtitan/models/*/scripts/*",
                 "torchtitan/models/flux/flux_datasets.py.skip", "torchtitan/components/ft/*"],
    },
    "torchtitan-0.3.0": {
        "title": "torchtitan 0.3.0 (package index)",
        "commit": "0.3.0",
        "package": "torchtitan",
        "files": ["torchtitan/train.py", "torchtitan/trainer.py", "torchtitan/config/*.py",
                  "torchtitan/distributed/**/*.py", "torchtitan/components/**/*.py", "torchtitan/models/**/*.py",
                  "torchtitan/protocols/*.py", "torchtitan/hf_datasets/**/*.py", "torchtitan/tools/utils.py"],
        "skip": ["torchtitan/models/flux/inference/*", "torchtitan/models/*/scripts/*"],
    },
    "torchtitan-main": {
        "title": "torchtitan main b5bcd76c6",
        "commit": "b5bcd76c6",
        "package": "torchtitan",
        "files": ["torchtitan/train.py", "torchtitan/trainer.py", "torchtitan/config/*.py",
                  "torchtitan/distributed/**/*.py", "torchtitan/components/**/*.py", "torchtitan/models/**/*.py",
                  "torchtitan/protocols/*.py", "torchtitan/hf_datasets/**/*.py", "torchtitan/tools/utils.py"],
        "skip": ["torchtitan/models/flux/inference/*", "torchtitan/models/*/scripts/*"],
    },
    "accelerate-1.15.0": {
        "title": "Accelerate 1.15.0 (package index)",
        "commit": "1.15.0",
        "package": "accelerate",
        "files": ["accelerate/parallelism_config.py", "accelerate/commands/config/config_args.py",
                  "accelerate/commands/launch.py", "accelerate/utils/launch.py", "accelerate/utils/dataclasses.py",
                  "accelerate/accelerator.py", "accelerate/utils/fsdp_utils.py"],
        "skip": [],
        # the config and Accelerator-time path of a parallelism config only: file -> functions (regex)
        "only": {"accelerate/commands/launch.py": r"^_validate_launch_command$",
                 "accelerate/utils/launch.py": r"^(prepare_multi_gpu_env|prepare_deepspeed_cmd_env|"
                                               r"prepare_extend_env_parallelism_config)$",
                 "accelerate/utils/dataclasses.py": r"^(TorchTensorParallelConfig|TorchContextParallelConfig|"
                                                    r"DeepSpeedSequenceParallelConfig)\.__post_init__$",
                 "accelerate/accelerator.py": r"^Accelerator\.(_prepare_tp|_prepare_cp|_prepare_fsdp2)$",
                 "accelerate/utils/fsdp_utils.py": r"^fsdp2_switch_optimizer_parameters$"},
    },
}


@dataclass
class Site:
    """One raise or assert statement."""

    file: str
    line: int
    function: str          # qualified: Class.method, or <module>
    kind: str              # "raise" | "assert"
    exception: str         # ValueError, AssertionError, ...
    condition: str         # what makes it fire (the enclosing ifs; an assert's negated test)
    message: str           # its message, f-string holes kept as {expr}

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def fingerprint(self) -> str:
        """Stable across line shifts and versions: file, function, exception, message (or condition)."""
        text = self.message or self.condition
        text = re.sub(r"\s+", " ", text).strip()[:80]
        return f"{self.file}::{self.function}::{self.exception}::{text}"


def files_of(root: Path, version: str) -> list[Path]:
    spec = VERSIONS[version]
    out = []
    for pattern in spec["files"]:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not any(fnmatch.fnmatch(rel, s) for s in spec["skip"]) and path not in out:
                out.append(path)
    return out


def enumerate_sites(root: Path, version: str) -> list[Site]:
    """Every raise/assert in the version's files, in file and line order."""
    root = Path(root)
    if not (root / VERSIONS[version]["package"]).is_dir():
        raise FileNotFoundError(f"{root}: no {VERSIONS[version]['package']}/ here")
    sites: list[Site] = []
    for path in files_of(root, version):
        rel = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        except (SyntaxError, UnicodeDecodeError):
            continue
        _Walker(rel, sites).visit(tree)
    only = VERSIONS[version].get("only", {})
    sites = [s for s in sites if s.file not in only or re.search(only[s.file], s.function)]
    return sorted(sites, key=lambda s: (s.file, s.line))


class _Walker(ast.NodeVisitor):
    def __init__(self, rel: str, sites: list):
        self.rel, self.sites = rel, sites
        self.scope: list[str] = []
        self.conds: list[tuple] = []  # (text, whether it binds looser than ``and``) of each enclosing condition

    def _scoped(self, node):
        self.scope.append(node.name)
        saved, self.conds = self.conds, []
        self.generic_visit(node)
        self.conds = saved
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def visit_If(self, node: ast.If):
        test = _short(ast.unparse(node.test))
        self.visit(node.test)
        self.conds.append((test, _binds_looser(node.test)))
        for stmt in node.body:
            self.visit(stmt)
        self.conds.pop()
        if node.orelse:
            self.conds.append((f"not ({test})", False))
            for stmt in node.orelse:
                self.visit(stmt)
            self.conds.pop()

    def visit_For(self, node):
        self.conds.append((f"for {_short(ast.unparse(node.target))} in {_short(ast.unparse(node.iter), 60)}", False))
        for stmt in node.body:
            self.visit(stmt)
        self.conds.pop()
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_Match(self, node):
        subject = _short(ast.unparse(node.subject))
        for case in node.cases:
            self.conds.append((f"{subject} matches {_short(ast.unparse(case.pattern))}", False))
            for stmt in case.body:
                self.visit(stmt)
            self.conds.pop()

    def visit_Raise(self, node: ast.Raise):
        exc = node.exc
        name = "re-raise" if exc is None else (_name(exc.func) if isinstance(exc, ast.Call) else _name(exc))
        self._add(node, "raise", name, _joined(self.conds) or "always (when reached)", _message(exc))

    def visit_Assert(self, node: ast.Assert):
        cond = _joined(self.conds + [(f"not ({_short(ast.unparse(node.test))})", False)])
        self._add(node, "assert", "AssertionError", cond, _message(node.msg) if node.msg else "")

    def _add(self, node, kind, exc, cond, message):
        self.sites.append(Site(self.rel, node.lineno, ".".join(self.scope) or "<module>", kind, exc or "?",
                               _short(cond, 300), _short(message, 200)))


def _name(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts)) if parts else ast.unparse(node)[:40]


def _message(node) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Call):
        node = node.args[0] if node.args else None
        if node is None:
            return ""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.values)
    if isinstance(node, ast.BinOp):  # "a" + "b" / implicit concatenation split by + or %
        return _message(node.left) + _message(node.right)
    return ast.unparse(node)


def _binds_looser(test: ast.expr) -> bool:
    """``a or b``, ``x if c else y``, a lambda: joined to other conditions by ``and``, it needs parentheses (``:=``
    has them from ``ast.unparse`` already)."""
    return isinstance(test, (ast.IfExp, ast.Lambda)) or (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or))


def _joined(conds: list) -> str:
    """A site's enclosing conditions ((text, looser) each) joined by ``and`` as Python reads the code: a condition
    that binds looser than ``and`` in parentheses when it is not alone."""
    if len(conds) == 1:
        return conds[0][0]
    return " and ".join(f"({text})" if looser else text for text, looser in conds)


def _short(text: str, n: int = 160) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= n else text[: n - 1] + "…"
