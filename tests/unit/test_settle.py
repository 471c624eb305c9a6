"""The exit rule of a sink-started resolver (connector/settle.py), on decision logs folded by DecisionState: when it
may go, and what keeps it."""

from __future__ import annotations

from connector.decisions import DecisionState, decision_records
from connector.settle import Settling

IMMUNITY, INTERVAL = 4.0, 0.3
ROUNDS = 2 * INTERVAL


def decide(state: DecisionState, batch: str, stored: float, *, ended: bool = False) -> None:
    for record in decision_records(batch, "c", {"run": 1}, immunity_s=int(IMMUNITY)):
        state.apply(record, int(stored * 1000))
    if ended:
        state.apply({"kind": "ended", "batch": batch})


def settling(state: DecisionState, started: float) -> Settling:
    rule = Settling(immunity_s=IMMUNITY, started=started)
    rule.note_brokers(INTERVAL, 1.0)
    rule.note_log(state, started)
    return rule


def test_a_batch_job_the_driver_ended_lets_its_resolver_go_at_once() -> None:
    state = DecisionState()
    rule = settling(state, 100.0)
    assert rule.waiting_for(state, 101.0) == "a first decision"
    decide(state, "job-1", 101.0, ended=True)
    rule.note_log(state, 101.5)
    assert rule.waiting_for(state, 101.5) is None


def test_what_the_driver_left_keeps_the_resolver_until_checked_and_answered() -> None:
    state = DecisionState()
    rule = settling(state, 100.0)
    decide(state, "job-1", 101.0)  # a retried task: not ended
    rule.note_log(state, 101.2)
    assert rule.waiting_for(state, 101.2 + IMMUNITY) == "the checks of batch job-1"
    rule.note_check(101.2 + IMMUNITY + 0.1, 4.0)  # a loser asked about and answered
    assert rule.waiting_for(state, 101.2 + IMMUNITY + ROUNDS) == "more checks"
    assert rule.waiting_for(state, 101.2 + IMMUNITY + 0.1 + ROUNDS) is None


def test_a_checks_immunity_or_a_decided_records_raises_the_wait() -> None:
    state = DecisionState()
    rule = settling(state, 100.0)
    for record in decision_records("job-1", "c", {"run": 1}, immunity_s=30):
        state.apply(record, 101_000)
    rule.note_log(state, 101.0)
    assert rule.waiting_for(state, 101.0 + IMMUNITY + ROUNDS + 1) == "the checks of batch job-1"
    assert rule.waiting_for(state, 101.0 + 30 + ROUNDS) is None


def test_a_streaming_resolver_waits_out_twice_the_gap_between_micro_batches() -> None:
    state = DecisionState()
    rule = settling(state, 100.0)
    for batch, at in (("0", 101.0), ("1", 111.0)):  # 10 s apart
        decide(state, batch, at)
        rule.note_log(state, at)
    assert rule.waiting_for(state, 111.0 + IMMUNITY + ROUNDS) == "the next micro-batch"
    assert rule.waiting_for(state, 131.0) is None  # the query stopped: gone after 2 x 10 s


def test_a_resolver_of_a_restarted_query_keeps_its_pace() -> None:
    state = DecisionState()
    decide(state, "0", 50.0)
    decide(state, "1", 58.0)  # decided 8 s apart, long before this resolver starts
    rule = settling(state, 100.0)
    assert rule.waiting_for(state, 100.0 + IMMUNITY + ROUNDS) == "the next micro-batch"
    assert rule.waiting_for(state, 116.0) is None


def test_an_ended_job_does_not_cut_short_the_wait_for_an_earlier_job_of_the_same_sink() -> None:
    state = DecisionState()
    decide(state, "job-a", 99.0)  # decided a second before this resolver started, rows left to the check
    rule = settling(state, 100.0)
    decide(state, "job-b", 101.0, ended=True)
    rule.note_log(state, 101.0)
    assert rule.waiting_for(state, 101.0) == "the checks of batch job-a"
    assert rule.waiting_for(state, 99.0 + IMMUNITY + ROUNDS) is None
