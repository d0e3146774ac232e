"""Typed errors and the documented exit codes.

Exit codes (stable, documented in the README):
    0  nothing at or above ``--fail-on``
    1  findings at or above ``--fail-on``
    2  usage error, unreadable input, or an invalid rule file
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

# Problems with an input file itself (not rules): the file cannot be checked.
INPUT_ERRORS = {
    "ML001": ("unreadable-file", "the file cannot be read (missing, a directory, no permission, too large)"),
    "ML002": ("not-text", "the file is not UTF-8 text (binary, invalid UTF-8, or a byte-order mark TOML forbids)"),
    "ML003": ("invalid-toml", "the file is not valid TOML (syntax error, duplicate key)"),
    "ML004": ("ambiguous-dialect", "the file has sections of two dialects, so which framework reads it is unclear"),
    "ML005": ("invalid-python", "a Python config registry that Python itself cannot parse (syntax error)"),
    "ML006": ("invalid-launch", "a launch line, launch script or saved config that names no config meshlint can check"),
    "ML007": ("input-too-large", "the input exceeds one of meshlint's documented limits (nesting depth, integer digits, "
                                 "line length, file size)"),
    "ML009": ("invalid-yaml", "the file is not valid YAML as yaml.safe_load reads it (syntax error, several documents, "
                              "a tag that builds objects)"),
    "ML008": ("internal-error", "meshlint itself failed on this file: a bug, reported instead of a traceback "
                                "(please report it with the file)"),
}


class MeshlintError(Exception):
    """Base class; ``str()`` is a message for the user, never a traceback."""


class InputError(MeshlintError):
    """A config file that cannot be checked at all (exit 2)."""

    def __init__(self, code: str, message: str, line: int = 1, col: int = 1, help: str | None = None):
        super().__init__(message)
        self.code = code
        self.name = INPUT_ERRORS[code][0]
        self.message = message
        self.line = line
        self.col = col
        self.help = help


class RuleFileError(MeshlintError):
    """A rule file that is invalid: names the file and the field."""

    def __init__(self, path: str, field: str | None, message: str):
        where = f"{path}: field '{field}'" if field else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.field = field


class UsageError(MeshlintError):
    """Bad command-line usage (exit 2)."""
