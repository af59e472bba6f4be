"""``python -m dynnets``: the ``dynnets`` command (see :mod:`dynnets.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
