"""``python -m grok_lightning VERB ...``: the same as the ``grok-lightning`` command."""

import os
import sys

if __name__ == "__main__":
    # `python -m` put the working directory first on sys.path: a module lying there (a filelock.py
    # next to a results folder from elsewhere) must not shadow or add to what the command imports.
    # The package itself is imported already (from where it is installed), its dependencies not yet.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd(), ".")]

    from grok_lightning.cli import main

    sys.exit(main())
