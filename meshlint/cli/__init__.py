"""The command line: flag parsing (click, and the click-free fast path) and the commands' bodies."""
