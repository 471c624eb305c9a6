"""``python -m broker.console`` runs ``mqconsole``."""

import sys

from broker.console.startup import main

if __name__ == "__main__":
    sys.exit(main())
