"""``python -m broker.namesrv``: start a NameServer, as ``mqnamesrv`` does."""

from broker.namesrv.startup import main

if __name__ == "__main__":
    main()
