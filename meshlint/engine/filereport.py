"""What checking one file gives (FileReport), and what every reporter and the file walk share.

Kept free of the pipeline (dialects, rules, expressions, TOML): a run answered from the results
cache (meshlint/cli/results_cache.py) builds its reports from this module alone. ``meshlint.engine.check``
re-exports every name here.
"""

from __future__ import annotations

import os
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a cached run never needs it)

from meshlint.engine.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from meshlint.frameworks.base import Resolution, Spec
    from meshlint.errors import InputError
    from meshlint.inputs.source import Source
    from meshlint.mesh.topology import Topology

SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"}


class FileReport:
    """Everything known about one file after a check (or why it could not be checked)."""

    def __init__(self, path: str, status: str, dialect: str | None = None, note: str | None = None,
                 error: InputError | None = None, source: Source | None = None, spec: Spec | None = None,
                 topology: Topology | None = None, resolution: Resolution | None = None):
        self.path = path
        self.status = status              # checked | skipped | error
        self.dialect = dialect
        self.note = note                  # why a file was skipped
        self.error = error
        self.source = source
        self.spec = spec
        self.topology = topology
        self.resolution = resolution
        self.findings: list = []
        self.suppressed: list = []        # findings silenced by '# meshlint: ignore[...]' comments
        self.skips: list = []
        self.fail_on = "error"            # this file's --fail-on (the project configuration may set it)
        self.diff = None                  # MeshDiff against --diff-base, when asked and the file changed
        self.diff_note: str | None = None  # why there is no diff (new file, unchanged)
        self.diff_base: str | None = None  # the revision --diff-base compared with
        self.cacheable = True             # False when the result depended on the clock (a search out of time)
        self.cached_json: dict | None = None  # from the results cache: the JSON report's entry for this file
        self.memory: dict | None = None   # the whole per-GPU peak of its layout (memory_check.file_memory)

    def worst(self) -> int:
        if self.status == "error":
            return SEVERITY_RANK["error"]
        return max((SEVERITY_RANK[f.severity] for f in self.findings), default=-1)


# Explicit inputs besides TOML: torchtitan registries (any .py; "file.py::function" picks one),
# launch scripts, and the JSON a run saves with --debug.save_config_file.
REGISTRY_FILE = "config_registry.py"   # what a directory walk picks up besides *.toml
SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm")


def input_kind(path: str) -> str:
    """toml | registry | script | saved | yaml: how an input path is read (by its name, never its content)."""
    file = path.split("::", 1)[0]
    if "::" in path or file.endswith(".py"):
        return "registry"
    if file.endswith(SCRIPT_SUFFIXES):
        return "script"
    if file.endswith((".yaml", ".yml")):
        return "yaml"
    if file.endswith(".json"):
        return "saved"
    return "toml"


def collect_paths(args: list[str]) -> list[str]:
    """Expand directories to the TOML files and torchtitan config registries below them;
    keep explicit files (any kind, see :func:`input_kind`) as given."""
    out: list[str] = []
    for arg in args:
        if os.path.isdir(arg):
            found = []
            for root, dirs, files in os.walk(arg):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                found += [os.path.join(root, f) for f in files if f.endswith(".toml") or f == REGISTRY_FILE]
            out.extend(sorted(found))
        else:
            out.append(arg)
    return list(dict.fromkeys(out))


def finding_file(report: FileReport, finding: Finding) -> str:
    """The file a finding's line is in: its own (registry configs), else the report's file
    (``reg.py::fn`` -> ``reg.py``; a launch script's ``run.sh:12::fn`` -> ``run.sh``)."""
    if finding.file:
        return finding.file
    file = report.path.split("::", 1)[0]
    head, sep, tail = file.rpartition(":")
    return head if sep and tail.isdigit() and "::" in report.path else file


def input_error_finding(error: InputError) -> Finding:
    return Finding(error.code, error.name, "error", error.message, error.help, None, error.line, error.col)
