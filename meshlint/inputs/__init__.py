"""Inputs other than TOML files: torchtitan's Python config registries, launch lines and scripts, checkouts."""
