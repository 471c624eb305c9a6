"""A slice of the pre-authentication fuzz campaign (bench/fuzz_preauth.py): 5,000 generated inputs, a fixed seed,
through the broker's path before a processor. Only errors of the error tree may come out, and the C decoders must
agree with their Python twins; the findings the full campaign made have their own regression tests (remoting)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from bench.fuzz_corpus import ALL_CODES, Generator, seed_commands
from bench.fuzz_target import PreAuthTarget

SLICE = 5_000
SEED = 20_261_126


def test_a_slice_of_the_campaign_raises_only_errors_of_the_tree(tmp_path: Path) -> None:
    generator = Generator(SEED)
    target = PreAuthTarget(tmp_path)
    totals: collections.Counter[str] = collections.Counter()
    for index in range(SLICE):
        outcome = target.run(generator.generate(index))  # raises Finding, naming the step, for anything else
        totals.update(commands=outcome.commands, refused=outcome.refused, tree_errors=outcome.tree_errors)
    # the slice reaches every layer: commands decoded, some refused by the ACL checks, errors of the tree raised
    assert totals["commands"] > SLICE // 4
    assert 0 < totals["refused"] < totals["commands"]
    assert totals["tree_errors"] > SLICE


def test_the_seeds_are_valid_requests_of_every_code(tmp_path: Path) -> None:
    commands = seed_commands()
    assert {cmd.code for cmd in commands} == set(ALL_CODES)
    target = PreAuthTarget(tmp_path)
    signed_by_super = [cmd for cmd in commands if cmd.ext_fields.get("AccessKey") == "rocketmq"]
    assert signed_by_super
    for cmd in signed_by_super:  # the ACL 2.0 super user passes ACL 2.0; ACL 1.0 does not know it
        assert target.pipeline.evaluator is not None
        target.pipeline.evaluator.check(cmd, "127.0.0.1")


def test_the_fuzz_parses_with_the_table_the_processors_parse_through() -> None:
    """One table (request_headers): a processor's parse takes its code's wire names from it and refuses a header its
    code does not list; the fuzz parses every code's headers from the same table."""
    from bench.fuzz_headers import CLIENT_ONLY_HEADERS, HEADER_CLASSES
    from broker.common.errors import LocalProtocolError
    from broker.remoting.codes import RequestCode
    from broker.remoting.command import create_request
    from broker.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
    from broker.server.processors.request_headers import REQUEST_HEADERS, request_header

    v2 = create_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1",
                                                      "f": "0", "g": "0", "h": "0"})
    header = request_header(v2, SendMessageRequestHeader)
    assert (header.producer_group, header.topic, header.queue_id) == ("PG", "T", 1)
    with pytest.raises(LocalProtocolError, match="PullMessageRequestHeader"):
        request_header(v2, PullMessageRequestHeader)
    for code, parses in REQUEST_HEADERS.items():
        assert HEADER_CLASSES[code][:len(parses)] == parses
    assert set(HEADER_CLASSES) == set(REQUEST_HEADERS) | set(CLIENT_ONLY_HEADERS)
