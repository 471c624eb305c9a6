"""Spark connector: ``format("rmq")`` as a batch and streaming source and an exactly-once transactional sink.

May import: ``broker.common``, ``broker.remoting``, ``broker.client`` and ``broker._speedups`` (the pull bodies'
columns in C) (Spark executors import this package; the broker's server code stays off them).

>>> from connector import register
>>> register(spark)  # doctest: +SKIP
>>> spark.readStream.format("rmq").option("namesrvAddr", "127.0.0.1:9876").option("topic", "T").load()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connector.datasource import RmqDataSource

__all__ = ["RmqDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("rmq")`` available in ``spark`` (Python data sources are registered per session)."""
    from connector.datasource import RmqDataSource

    spark.dataSource.register(RmqDataSource)


def __getattr__(name: str) -> object:
    """``RmqDataSource`` on first use: the sink's resolver (``python -m connector.resolver``, a process per batch job,
    running beside its tasks) imports this package without PySpark and numpy (about 60 ms of its CPU to ready)."""
    if name == "RmqDataSource":
        from connector.datasource import RmqDataSource

        return RmqDataSource
    raise AttributeError(f"module 'connector' has no attribute {name!r}")
