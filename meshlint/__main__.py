"""``python -m meshlint`` behaves exactly like the ``meshlint`` command."""

from meshlint.entry import main

if __name__ == "__main__":
    main()
