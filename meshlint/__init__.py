"""meshlint: a linter and static analyser for the parallelism configs of large-model training."""

__version__ = "0.1.0"
