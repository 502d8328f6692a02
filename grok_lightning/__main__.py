"""``python -m grok_lightning VERB ...``: the same as the ``grok-lightning`` command."""

import sys

from grok_lightning.cli import main

if __name__ == "__main__":
    sys.exit(main())
