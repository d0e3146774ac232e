"""``python -m meshlint`` behaves exactly like the ``meshlint`` command."""

from meshlint.cli.entry import console

if __name__ == "__main__":
    console()
