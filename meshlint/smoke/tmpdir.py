"""A private TMPDIR for a process that runs torch (it writes torchinductor_* there), removed however it ends. No torch."""

from __future__ import annotations

import os
import shutil
import tempfile

NAMES = ("TMPDIR", "TMP", "TEMP")


class PrivateTmp:
    """``enter()`` points TMPDIR (and this process's children) at a fresh directory; ``leave()`` removes it and puts
    the variables back. Also a context manager. Leaving twice is harmless."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.path: str | None = None
        self.saved: dict = {}

    def enter(self) -> str:
        self.path = tempfile.mkdtemp(prefix=self.prefix)
        self.saved = {name: os.environ.get(name) for name in NAMES}
        for name in NAMES:
            os.environ[name] = self.path
        tempfile.tempdir = None  # gettempdir() caches: ask again
        return self.path

    def leave(self) -> None:
        if self.path is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        self.path = None
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir = None

    def __enter__(self) -> str:
        return self.enter()

    def __exit__(self, *exc) -> None:
        self.leave()
