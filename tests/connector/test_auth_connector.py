"""The connector with ACL 2.0 on our broker (the shared auth cluster): an exactly-once batch write and a batch read,
both with ``accessKey``/``secretKey``, succeed (tasks, the driver's commit and the resolver all sign); an unsigned
read, batch or streaming, fails at its start naming the grants it needs; a write by a user who may read the topic but
not publish to it fails before any task sends, naming PUB on the topic, and stores nothing; no secret shows in the
plan or in those errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client import BlockingClient
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.common.fastjson import encode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.signing import SessionCredentials, sign_request
from tests.helpers import mqadmin_ok
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import Cluster, ClusterPool

pytestmark = [pytest.mark.slow]

TOPIC = "AuthConnectorTopic"
READER = SessionCredentials("spark_reader", "readerSecret1")  # SUB and GET on the topic, SUB on groups: no PUB


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
    assert (f"reading topic {TOPIC} as consumer group DEFAULT_CONSUMER needs GET and SUB on Topic:{TOPIC} and SUB "
            "on Group:DEFAULT_CONSUMER" in str(refused.value))
    assert SUPER.secret_key not in str(refused.value)


def create_reader(addr: str) -> None:
    """READER, a normal user who may read TOPIC (GET, SUB) and join any group, but not publish."""
    user = {"password": READER.secret_key, "userType": "Normal"}
    acl = {"policies": [{"entries": [
        {"resource": f"Topic:{TOPIC}", "actions": ["Sub", "Get"], "decision": "Allow"},
        {"resource": "Group:*", "actions": ["Sub", "Get"], "decision": "Allow"}]}]}
    with BlockingRemotingClient(addr) as client:
        for code, fields, body in ((RequestCode.AUTH_CREATE_USER, {"username": READER.access_key}, user),
                                   (RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{READER.access_key}"}, acl)):
            request = create_request(code, fields, encode_json(body).encode())
            response = client.invoke(sign_request(request, SUPER), 5000)
            assert response.code == ResponseCode.SUCCESS, response.remark


def test_a_query_without_the_grants_it_needs_fails_at_its_start(spark, clusters: ClusterPool, resolver_dir: Path,
                                                                tmp_path: Path) -> None:
    cluster = clusters.shared(**AUTH_CONF)
    assert isinstance(cluster, Cluster)
    ns, addr = cluster.namesrv_addr, cluster.brokers[0].addr
    create_reader(addr)
    with BlockingClient(ns, credentials=SUPER) as client:
        queues = client.fetch_message_queues(TOPIC)
        ends = [client.get_max_offset(mq) for mq in queues]

    unsigned = (spark.readStream.format("rmq").option("namesrvAddr", ns).option("topic", TOPIC).load()
                .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
                .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=f"needs GET and SUB on Topic:{TOPIC} and SUB on Group:DEFAULT_CONSUMER"
                       ) as refused:
        unsigned.awaitTermination()
    assert "set the accessKey and secretKey options" in str(refused.value)

    rows = spark.createDataFrame([(f"denied-{i}",) for i in range(10)], "body string").repartition(2)
    with pytest.raises(Exception, match=f"writing to topic {TOPIC} needs PUB on Topic:{TOPIC}; the broker at "
                       f"{addr} refused: User:{READER.access_key} has no permission to access Topic:{TOPIC}"
                       ) as denied:
        (rows.write.format("rmq").mode("append").option("namesrvAddr", ns).option("topic", TOPIC)
         .option("resolverDir", str(resolver_dir)).option("accessKey", READER.access_key)
         .option("secretKey", READER.secret_key).save())
    assert "grant them to the user of accessKey spark_reader" in str(denied.value)
    assert not list(resolver_dir.glob("*.pid"))  # refused before the resolver was started
    for text in (str(refused.value), str(denied.value)):
        assert READER.secret_key not in text and SUPER.secret_key not in text
    with BlockingClient(ns, credentials=SUPER) as client:
        assert [client.get_max_offset(mq) for mq in queues] == ends  # nothing stored
