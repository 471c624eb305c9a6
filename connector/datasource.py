"""The ``rmq`` data source: Spark asks it for readers and writers; options are parsed here, once, at query start."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType


class RmqDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("rmq")``; see connector/options.py for the options."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    def schema(self) -> StructType:
        from connector.source import SOURCE_SCHEMA

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
