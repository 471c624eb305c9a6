"""The connector with ACL 2.0 on our broker (the shared auth cluster): an exactly-once batch write and a batch read,
both with ``accessKey``/``secretKey``, succeed (tasks, the driver's commit and the resolver all sign), an unsigned
read fails with the broker's refusal, and the secret shows in neither the read's plan nor that error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mqadmin_ok
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import Cluster, ClusterPool

pytestmark = [pytest.mark.slow]

TOPIC = "AuthConnectorTopic"


def test_signed_exactly_once_write_and_read(spark, clusters: ClusterPool, resolver_dir: Path,
                                            tmp_path: Path) -> None:
    cluster = clusters.shared(**AUTH_CONF)
    assert isinstance(cluster, Cluster)
    ns, addr = cluster.namesrv_addr, cluster.brokers[0].addr
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {SUPER.access_key}\nsecretKey: {SUPER.secret_key}\n")
    mqadmin_ok(f"-Drocketmq.home.dir={home}", "updateTopic", "-n", ns, "-b", addr, "-t", TOPIC, "-r", "2", "-w", "2")
    keys = {"accessKey": SUPER.access_key, "secretKey": SUPER.secret_key}

    bodies = [f"row-{i}" for i in range(20)]
    (spark.createDataFrame([(b,) for b in bodies], "body string").repartition(2)
     .write.format("rmq").mode("append").option("namesrvAddr", ns).option("topic", TOPIC)
     .option("resolverDir", str(resolver_dir)).options(**keys).save())

    read = (spark.read.format("rmq").option("namesrvAddr", ns).option("topic", TOPIC).options(**keys).load())
    assert sorted(r.body.decode() for r in read.select("body").collect()) == sorted(bodies)
    plan = read._jdf.queryExecution().toString()  # every phase, parsed to physical
    assert "rmq" in plan and SUPER.secret_key not in plan

    unsigned = spark.read.format("rmq").option("namesrvAddr", ns).option("topic", TOPIC).load()
    with pytest.raises(Exception, match="username cannot be null") as refused:
        unsigned.collect()
    assert SUPER.secret_key not in str(refused.value)
