"""When a resolver the sink started may exit: once nothing it may still be asked about is left ("settled").

Rule 1: the exit rule of a sink-started resolver is written here once; the service (``--service``) does not use it.

What a resolver must not miss is the broker's check of a half message that only it can end: a winner the driver
did not commit (late, failed, or the driver died after the decision) and, for tidiness, a loser (a failed,
speculative or re-run attempt; a task of an aborted job). The broker checks a half first ``immunity`` after its
birth (its CHECK_IMMUNITY_TIME_IN_SECONDS, at least the broker's transactionTimeOut), at the next round of its check
service, then again every round (``interval``: transactionCheckInterval) while nobody ends it. The resolver cannot
list the open halves; it sees its decision log, the checks it answers, and the brokers' timings (GET_BROKER_CONFIG
of the masters it heartbeats; 60 s, twice Apache's default, for one that does not answer). From these:

- Every half of a batch is born before the batch's decided (or aborted) record is stored, since Spark commits only
  after the tasks ended. So the checks of whatever the driver left of batch B come by ``t_B + immunity +
  interval``, where ``t_B`` is when the resolver saw the record appear (for records already in the log when it
  starts: their store time) and ``immunity`` the largest the resolver knows (its own ``--check-immunity-s``, the
  decided records' ``immunity``, the checks' property, the brokers' transactionTimeOut). B is **pending** until
  ``t_B + immunity + 2 x interval`` (one round of margin), unless the log says the driver ended every half of B itself
  (an "ended" record: then nothing of B is left to ask about).
- A half still open after a check (answered UNKNOWN, or an answer lost) is asked again the next round: the resolver
  waits until no check came for **2 x interval**.
- A streaming query commits at its own pace: the resolver waits **2 x the longest gap** between two of its
  micro-batches' decisions (numbered batches) after the last one it saw appear (or after its start), so it does not
  exit between micro-batches (each commit would start a new one) but exits soon after the query stops. The gaps
  are those it saw, and, for a resolver started by a restarted query, the gap between the last two decisions
  already in the log (their store times).
- Before its first decision (started when a batch job is planned, or by a commit) it waits **immunity + 2 x
  interval** after its start (the checks of anything open then come by that time), unless every batch it saw appear
  since is ended.

The resolver is settled when all of these hold; it then says so in its pid file ("<pid> exiting"), reads the log
once more a poll later, and exits (removing its pid and lock files) unless something new came meanwhile. A driver
that recorded a decision and left halves to the check makes sure, afterwards, that a resolver is ``ready`` (not
``exiting``): one that was exiting then sees the decision in its last read and stays, or is gone and a new one
starts (connector/resolver.py ``ensure_resolver``). ``--idle-timeout-s`` (``resolverIdleTimeoutSeconds``) stays
an upper bound: a resolver with no checks and no decisions for that long exits all the same.

The driver records "ended" only when no other attempt it can know of left halves: each task reports its
attemptNumber, and one above 0 (a retry, or a speculative copy that won) means an earlier attempt may have sent
some. Two kinds stay out of its sight: a speculative copy that lost to the original (Spark gives a data source's
Python code no SparkConf, so ``spark.speculation`` cannot be read) and the tasks of a stage attempt Spark re-ran
after a fetch failure (PySpark's TaskContext has no stageAttemptNumber, and a re-run stage counts attempts from 0).
Their halves are losers, and what is never answered is never committed: a broker asks no one when no producer of
the group is online, and discards the half after transactionCheckMax checks. So an early exit cannot make a row
appear twice; it can only leave such losers to that discard, or lose a winner the driver left (hence the margins
above, and the "ended" record only when the driver ended every winner).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connector.decisions import DecisionState

FALLBACK_INTERVAL_S = 60.0  # a broker whose transactionCheckInterval cannot be read: twice Apache's default 30 s
CHECK_ROUNDS = 2  # check rounds of margin: a round that ran late, or an answer lost on the way


@dataclass
class Settling:
    """One sink's part of the exit rule: what the resolver saw of its log and its checks, and when (wall clock, s,
    to compare with the broker's store times)."""

    immunity_s: float  # the largest check immunity known (own option, checks' properties, the brokers' floor)
    started: float
    interval_s: float = FALLBACK_INTERVAL_S  # the largest transactionCheckInterval of the brokers asked
    seen: dict[str, float] = field(default_factory=dict)  # batch -> when its decided/aborted record appeared
    live: set[str] = field(default_factory=set)  # batches whose record appeared while the resolver ran
    last_live: float | None = None  # the last numbered (streaming) batch seen appearing
    longest_gap: float = 0.0  # between two numbered batches' decisions
    last_check: float | None = None
    _read: bool = False

    def note_log(self, state: DecisionState, now: float) -> None:
        """Take in the batches decided or aborted since the last call; those of the first read are old (their store
        time counts), later ones appeared now."""
        for batch in [*state.decided, *state.aborted]:
            if batch in self.seen:
                continue
            stored = state.stored_ms.get(batch, 0) / 1000
            decision = state.decided.get(batch)
            if decision is not None and decision.immunity_s:
                self.immunity_s = max(self.immunity_s, decision.immunity_s)
            if not self._read:
                self.seen[batch] = stored
                continue
            self.seen[batch] = max(now, stored)
            self.live.add(batch)
            if batch.isdigit():
                if self.last_live is not None:
                    self.longest_gap = max(self.longest_gap, now - self.last_live)
                self.last_live = now
        if not self._read:  # the pace of a query restarted: its last two decisions
            numbered = sorted((b for b in state.decided if b.isdigit()), key=int)[-2:]
            if len(numbered) == 2:
                self.longest_gap = max(0.0, self.seen[numbered[1]] - self.seen[numbered[0]])
        self._read = True

    def note_check(self, now: float, immunity_s: float | None) -> None:
        self.last_check = now
        if immunity_s is not None:
            self.immunity_s = max(self.immunity_s, immunity_s)

    def note_brokers(self, interval_s: float, transaction_timeout_s: float) -> None:
        """The largest transactionCheckInterval and transactionTimeOut of the brokers asked (the timeout raises a
        shorter immunity, as Apache's getImmunityTime does)."""
        self.interval_s = interval_s
        self.immunity_s = max(self.immunity_s, transaction_timeout_s)

    def waiting_for(self, state: DecisionState, now: float) -> str | None:
        """What the resolver still waits for (for its log), or None when it is settled."""
        if not self._read:
            return "its first read of the decision log"
        rounds = CHECK_ROUNDS * self.interval_s
        for batch, seen in self.seen.items():
            if batch in state.ended:
                continue
            if now < seen + self.immunity_s + rounds:
                return f"the checks of batch {batch}"
        if self.last_check is not None and now < self.last_check + rounds:
            return "more checks"
        since = self.started if self.last_live is None else self.last_live
        if now < since + 2 * self.longest_gap:
            return "the next micro-batch"
        every_live_ended = bool(self.live) and self.live <= state.ended
        if not every_live_ended and now < self.started + self.immunity_s + rounds:
            return "a first decision"
        return None
