"""A dict filled on first read: what is built only if something looks.

The ``config`` fact's sections (meshlint/frameworks/config_values.py: a rule set that reads two sections pays for
two) and the built-in rules' docs (meshlint/engine/prebuilt.py: a check never reads one). Every read through the
dict's methods fills it first, and so do ``dict(d)``, ``{**d}``, ``==`` and ``json.dumps(d, indent=...)``, which
call them; ``_fill`` may be overridden to say how. C code that looks at the storage itself sees an unfilled one
empty: ``json.dumps(d)`` without ``indent`` writes ``{}``. Hand such code ``dict(d)``.
"""

from __future__ import annotations


class LazyDict(dict):
    """A dict that builds itself on first read (keys, values, ``in``, iteration, ``==``, printing, copying)."""

    __slots__ = ("_make",)

    def __init__(self, make):  # dict.__new__ made it empty already: no dict.__init__ to call
        self._make = make

    def _fill(self):
        make = self._make
        if make is not None:
            self._make = None
            dict.update(self, make())
        return self

    # the two reads a rule makes of a field: filled here without a call once built
    def __getitem__(self, k):
        if self._make is not None:
            self._fill()
        return dict.__getitem__(self, k)

    def __contains__(self, k):
        if self._make is not None:
            self._fill()
        return dict.__contains__(self, k)

    def __iter__(self):
        return dict.__iter__(self._fill())

    def __len__(self):
        return dict.__len__(self._fill())

    def __eq__(self, other):
        if isinstance(other, LazyDict):
            other._fill()
        return dict.__eq__(self._fill(), other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def __repr__(self):
        return dict.__repr__(self._fill())

    def get(self, k, default=None):
        return dict.get(self._fill(), k, default)

    def keys(self):
        return dict.keys(self._fill())

    def values(self):
        return dict.values(self._fill())

    def items(self):
        return dict.items(self._fill())

    def copy(self):
        return dict(self._fill())

    def __reduce__(self):  # copy / pickle as a plain dict
        return (dict, (dict(self._fill()),))
