"""``python -m opera``: the ``opera`` command, for an interpreter whose scripts are not on PATH
(or a checkout used through PYTHONPATH without installing it)."""

import sys

from opera.cli import main

if __name__ == "__main__":
    sys.exit(main())
