"""A killable Spark driver for the sink recovery tests: ``python tests/connector/sink_driver.py '<json>'``.

It puts itself in its own process group (so a fault hook can kill the whole driver: this process, its JVM and the
JVM's children), then runs one streaming query from JSON files in ``input`` (one file per micro-batch) into the rmq
sink with Trigger.AvailableNow, then (key ``batch``) one batch write, and exits 0 when both finished. JSON keys:
namesrv, topic, input, checkpoint, master, options (sink options), kill_after_decision (a batch id: the sink's
faultInjection kills this driver right after recording that batch's decision), batch ({"rows": n, "options": {...}}:
``df.write.format("rmq")`` of bodies "batch-<i>", two partitions, with these sink options).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    config = json.loads(sys.argv[1])
    os.setpgrp()
    from pyspark.sql import SparkSession

    from connector import register

    # No Delta here (jobs.spark.build_session would resolve its jars first): the driver needs only the rmq sink.
    spark = (SparkSession.builder.appName("rmq-sink-driver").master(config.get("master", "local[2]"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    options = dict(config.get("options", {}))
    fault = json.loads(options.pop("faultInjection", "{}"))
    if config.get("kill_after_decision") is not None:
        fault["killAfterDecision"] = {"batch": str(config["kill_after_decision"]), "pgid": os.getpid()}
    if fault:
        options["faultInjection"] = json.dumps(fault)
    rows = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(config["input"])
            .repartition(2)
            .selectExpr("concat('row-', cast(id as string)) as body", "concat('key-', cast(id % 3 as string)) as keys",
                        "concat('s', cast(id % 4 as string)) as shardingKey"))
    query = (rows.writeStream.format("rmq").options(**options).option("topic", config["topic"])
             .option("checkpointLocation", config["checkpoint"]).trigger(availableNow=True).start())
    query.awaitTermination()
    if config.get("batch"):
        batch = config["batch"]
        (spark.range(batch["rows"]).selectExpr("concat('batch-', cast(id as string)) as body").repartition(2)
         .write.format("rmq").options(**batch["options"]).mode("append").save())
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
