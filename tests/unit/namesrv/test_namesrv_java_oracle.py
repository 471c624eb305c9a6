"""Our NameServer answers byte for byte as Apache's does, over a 79-step session (namesrv_scenario.SCENARIO).

The first test compares with the answers captured from Apache's processors (no JDK needed); the ``java`` one runs
Apache's processors live (tests/java/namesrv/NamesrvOracle.java) and checks both our answers and the capture.
Codes, remarks, extFields and bodies (TopicRouteData in both JSON forms, ClusterInfo, TopicList, KVTable,
DataVersion, BrokerMemberGroup) must be identical, including Java's hash-table orders.
"""

from __future__ import annotations

import json

import pytest

from tests.javatools import JavaProgram, JavaToolError
from tests.unit.namesrv.namesrv_scenario import SCENARIO, build_oracle, load_capture, run_java, run_ours


def assert_same_answers(expected: list[dict], actual: list[dict]) -> None:
    assert len(actual) == len(expected) == len(SCENARIO)
    for index, (step, want, got) in enumerate(zip(SCENARIO, expected, actual, strict=True)):
        shown = {k: v for k, v in step.items() if k != "body"}
        assert got == want, f"step {index} {json.dumps(shown, ensure_ascii=False)}"


def test_answers_match_the_java_capture(tmp_path):
    assert_same_answers(load_capture(), run_ours(SCENARIO, str(tmp_path / "kvConfig.json")))


def test_kv_config_file_matches_java_bytes(tmp_path):
    """After the session, kvConfig.json holds what Apache's KVConfigManager wrote for the same puts and deletes."""
    run_ours(SCENARIO, str(tmp_path / "kvConfig.json"))
    expected = '{"configTable":{"other":{},"ORDER_TOPIC_CONFIG":{"OrderTopic":"broker-a:4","Shared":"broker-a:8"}}}'
    assert (tmp_path / "kvConfig.json").read_text(encoding="utf-8") == expected


@pytest.fixture(scope="module")
def oracle() -> JavaProgram:
    try:
        return build_oracle()
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Java NameServer oracle: {reason}", pytrace=False)


@pytest.mark.java
def test_answers_match_apache_live(oracle, tmp_path):
    java = run_java(oracle, SCENARIO, tmp_path)
    assert_same_answers(java, run_ours(SCENARIO, str(tmp_path / "kvConfig.json")))
    assert java == load_capture(), "the capture is stale: python -m tests.unit.namesrv.namesrv_scenario"
    assert (tmp_path / "java-kvConfig.json").read_bytes() == (tmp_path / "kvConfig.json").read_bytes()
