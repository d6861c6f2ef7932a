"""``python -m moralkit``: runs the command line, :func:`moralkit.cli.main` (the options, exit statuses and
examples are in :mod:`moralkit.cli`)."""

import sys

from moralkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
