"""The ``rmq`` data source: Spark asks it for its schema, readers and writers; options are parsed here, once, at query
start.

This module imports nothing of ours at load: Spark runs ``schema()`` in a Python process of its own for every
``load()``, and the reader and writer modules (the client, Arrow, numpy) would cost that process a good part of a
second before it answers; they are imported when Spark asks for a reader or a writer.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Every column nullable, as the Kafka source's: Spark checks the Arrow batches against this, field by field.
SOURCE_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("brokerName", StringType()),
    StructField("queueId", IntegerType()),
    StructField("queueOffset", LongType()),
    StructField("msgId", StringType()),
    StructField("offsetMsgId", StringType()),
    StructField("keys", StringType()),
    StructField("tags", StringType()),
    StructField("body", BinaryType()),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("bornTimestamp", TimestampType()),
    StructField("storeTimestamp", TimestampType()),
    StructField("bornHost", StringType()),
    StructField("storeHost", StringType()),
    StructField("reconsumeTimes", IntegerType()),
    StructField("sysFlag", IntegerType()),
])


class RmqDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("rmq")``; see connector/options.py for the options."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from connector.options import SourceOptions
        from connector.source import RmqBatchReader

        return RmqBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from connector.options import SourceOptions
        from connector.source import RmqStreamReader

        return RmqStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from connector.options import SinkOptions
        from connector.sink import RmqBatchWriter

        return RmqBatchWriter(SinkOptions.parse(self.options, schema, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from connector.options import SinkOptions
        from connector.sink import RmqStreamWriter

        return RmqStreamWriter(SinkOptions.parse(self.options, schema, streaming=True), schema)
