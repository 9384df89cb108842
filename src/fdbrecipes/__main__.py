"""``python -m fdbrecipes``: the ``fdbrecipes`` command."""

import sys

from .cli import main

if __name__ == "__main__":  # required: bench's spawned clients import the main module
    sys.exit(main())
