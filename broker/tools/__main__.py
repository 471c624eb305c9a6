"""``python -m broker.tools`` runs ``mqadmin``."""

import sys

from broker.tools.mqadmin import main

if __name__ == "__main__":
    sys.exit(main())
