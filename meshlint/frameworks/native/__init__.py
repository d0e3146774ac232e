"""The native dialect: a mesh written by hand."""
