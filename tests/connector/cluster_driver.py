"""A Spark driver on ``local-cluster[2,1,1024]`` (two executors, each its own JVM and Python workers), so nothing the
connector does may rely on state in the driver's memory: ``python tests/connector/cluster_driver.py '<json>'``.

It streams one topic into another through the rmq source and the rmq sink (Trigger.AvailableNow), then reads the
target back in batch and writes what it read as JSON lines to ``output``. JSON keys: namesrv, source, target,
checkpoint, output, sink (sink options).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    config = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession

    from connector import register

    spark = (SparkSession.builder.appName("rmq-local-cluster").master("local-cluster[2,1,1024]")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    source = (spark.readStream.format("rmq").option("namesrvAddr", config["namesrv"]).option("topic", config["source"])
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 40).load())
    query = (source.selectExpr("body", "keys", "tags", "properties")
             .writeStream.format("rmq").option("namesrvAddr", config["namesrv"]).option("topic", config["target"])
             .options(**config["sink"]).option("checkpointLocation", config["checkpoint"])
             .trigger(availableNow=True).start())
    query.awaitTermination()
    batches = len([p for p in query.recentProgress if p["numInputRows"] > 0])
    back = (spark.read.format("rmq").option("namesrvAddr", config["namesrv"]).option("topic", config["target"])
            .load().selectExpr("cast(body as string) as body", "keys", "tags", "queueId", "queueOffset").collect())
    with open(config["output"], "w") as out:
        out.write(json.dumps({"batches": batches}) + "\n")
        out.writelines(json.dumps(row.asDict()) + "\n" for row in back)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
