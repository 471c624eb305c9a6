"""``python -m broker``: start a broker, as ``mqbroker`` does."""

from broker.server.startup import main

if __name__ == "__main__":
    main()
