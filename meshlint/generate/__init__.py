"""Generators of meshlint's data files from a framework's own source, read with ``ast`` at a pinned commit.

Nothing here runs on the check path: these modules are run by hand (or by the
tests that check the committed data is current) when a framework version is
added or moved, e.g. ``python -m meshlint.generate.models --source DIR
--version main@b5bcd76c6``. They never import the framework or torch.
"""
