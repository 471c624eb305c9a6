"""``python -m broker.namesrv``: start a NameServer, as ``mqnamesrv`` does."""

import sys

from broker.namesrv.startup import main

if __name__ == "__main__":
    sys.exit(main())
