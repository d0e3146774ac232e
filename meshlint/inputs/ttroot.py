"""Finding the torchtitan that a registry or launch line refers to, without importing it: the directory
that holds the ``torchtitan`` package (a checkout's root, or site-packages for an installed wheel).

Order: ``--torchtitan-root DIR``; else the working directory (or ``start_dir``) and its parents, the
first holding ``torchtitan/config/`` (v0.1.0: ``torchtitan/config_manager.py``) and ``torchtitan/models/``; else the installed package, located
with ``importlib.util.find_spec("torchtitan")``, which for a top-level name only asks the import
system's finders where it is and executes nothing (checked in tests/test_launch.py), and, should a
finder fail, the ``sys.path`` entries scanned directly. Which version that code is, is
meshlint/frameworks/versions.py's question.
"""

from __future__ import annotations

import os
import sys

MAX_WALK = 64   # parent directories looked at, at most


def is_root(path: str) -> bool:
    """Whether ``path`` holds a torchtitan package with its config and models (a checkout or site-packages);
    its config is the ``config`` package, or v0.1.0's single ``config_manager.py``."""
    try:
        package = os.path.join(path, "torchtitan")
        return ((os.path.isdir(os.path.join(package, "config"))
                 or os.path.isfile(os.path.join(package, "config_manager.py")))
                and os.path.isdir(os.path.join(package, "models")))
    except (OSError, ValueError):
        return False


def find_root(start_dir: str | None = None, explicit: str | None = None) -> tuple:
    """(root, how) or (None, why not). ``how`` says which rule found it, for reports."""
    if explicit:
        path = os.path.abspath(os.path.expanduser(explicit))
        if is_root(path):
            return path, f"--torchtitan-root {explicit}"
        # the package directory itself given (…/torchtitan): its parent is the root
        if os.path.basename(path.rstrip(os.sep)) == "torchtitan" and is_root(os.path.dirname(path)):
            return os.path.dirname(path), f"--torchtitan-root {explicit} (the package's parent)"
        if not os.path.isdir(path):
            return None, f"--torchtitan-root {explicit} is not a directory"
        return None, f"--torchtitan-root {explicit} has no torchtitan/config/ (or config_manager.py) and torchtitan/models/"
    try:
        start = os.path.abspath(start_dir or os.getcwd())
    except OSError:
        start = None
    if start is not None:
        path = start
        for _ in range(MAX_WALK):
            if is_root(path):
                where = "the working directory" if start_dir is None else start
                return path, f"the torchtitan checkout holding {where}" if path != start else f"the checkout at {path}"
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    installed = _installed()
    if installed is not None:
        return installed
    return None, "no --torchtitan-root, no torchtitan checkout above the working directory, no installed torchtitan"


_CHECKOUTS: dict = {}  # (folder, explicit root) -> checkout_of's answer
_CHECKOUTS_MAX = 4096  # a long-lived process reads configs of many folders: the cache stays bounded


def checkout_of(path, explicit: str | None = None) -> tuple:
    """(root, how, identified) of the torchtitan a config file at ``path`` belongs to: ``find_root`` from the file's
    folder (``explicit``: --torchtitan-root), and ``versions.identify(root)`` of what it found (None where nothing
    was found). Cached per folder: a run's configs share a few folders, and finding and identifying a checkout
    reads its files. A ``path`` that is not a file name starts from the working directory."""
    start = os.path.dirname(os.path.abspath(path)) if isinstance(path, str) and path else None
    key = (start, explicit)
    hit = _CHECKOUTS.get(key)
    if hit is None:
        from meshlint.frameworks import versions

        root, how = find_root(start, explicit)
        if len(_CHECKOUTS) >= _CHECKOUTS_MAX:
            _CHECKOUTS.clear()
        hit = _CHECKOUTS[key] = (root, how, versions.identify(root) if root else None)
    return hit


def _installed() -> tuple | None:
    """The installed package's root, found without importing torchtitan."""
    import importlib.util

    module = sys.modules.get("torchtitan")
    locations = list(getattr(getattr(module, "__spec__", None), "submodule_search_locations", None) or []) \
        if module is not None else []
    if not locations:
        try:
            # a top-level name: no parent package is imported, no code of torchtitan runs
            spec = importlib.util.find_spec("torchtitan")
        except (ImportError, ValueError, AttributeError, OSError):
            spec = None
        if spec is not None:
            locations = list(spec.submodule_search_locations or [])
            if not locations and spec.origin:
                locations = [os.path.dirname(spec.origin)]
    for location in locations:
        root = os.path.dirname(os.path.abspath(location))
        if is_root(root):
            return root, f"the installed torchtitan package ({location}), located without importing it"
    for entry in sys.path:
        try:
            root = os.path.abspath(entry or os.getcwd())
        except OSError:
            continue
        if is_root(root):
            return root, f"torchtitan on sys.path ({root})"
    return None
