"""``python -m shiftbounds``: the same as the ``shiftbounds`` command."""

from shiftbounds.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
