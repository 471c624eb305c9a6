"""What a DLedger member keeps of its election: its term and whom it voted for, in ``<member dir>/currterm``.

MemberState.persistTerm writes ``voteLeader=<id>`` and ``currTerm=<n>`` (that order: Java's Properties hash order);
loadTerm reads either key if present. A member of a group of one votes for itself in the term it has: DLedger's
first candidate round does not raise the term, so such a member stays in term 0 across restarts.

The role moves as DLedger's MemberState moves it: CANDIDATE at start; ``next_term`` (a candidate only) raises the
term, to the largest term seen in the group if that is higher, and forgets the vote; ``change_to_candidate(term)``
only notes a larger term, which the next round adopts. The log's end (``ledger_end_index``/``_term``) is the store's,
kept here for the votes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

from broker.common.errors import StoreError
from broker.common.persist import write_atomic
from broker.common.properties import read_properties
from broker.dledger.layout import TERM_KEY, TERM_PERSIST_FILE, VOTE_FOR_KEY


class Role(StrEnum):
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


@dataclass(slots=True)
class MemberState:
    directory: str  # the member's folder, layout.member_dir
    self_id: str
    current_term: int = 0
    vote_for: str | None = None
    role: Role = Role.CANDIDATE
    leader_id: str | None = None
    group: str = ""
    peers: dict[str, str] = field(default_factory=dict)  # {id: address}, self included; empty = a group of one
    ledger_end_index: int = -1
    ledger_end_term: int = -1
    known_max_term_in_group: int = -1

    @property
    def path(self) -> str:
        return os.path.join(self.directory, TERM_PERSIST_FILE)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def peer_size(self) -> int:
        return len(self.peers) or 1

    def is_quorum(self, num: int) -> bool:
        """More than half the group, self counted: 2 of 3, 3 of 4, 3 of 5."""
        return num >= self.peer_size // 2 + 1

    def is_peer_member(self, member_id: str | None) -> bool:
        return member_id is not None and (member_id in self.peers or member_id == self.self_id)

    def set_vote_for(self, member_id: str) -> None:
        self.vote_for = member_id
        self.persist()

    def next_term(self) -> int:
        """A candidate's new round: the group's largest known term if above ours, else ours + 1; no vote yet."""
        if self.role is not Role.CANDIDATE:
            raise StoreError(f"{self.self_id}: next_term as {self.role}, not CANDIDATE")
        self.current_term = max(self.current_term + 1, self.known_max_term_in_group)
        self.vote_for = None
        self.persist()
        return self.current_term

    def change_to_leader(self, term: int) -> None:
        self._check_term(term)
        self.role, self.leader_id = Role.LEADER, self.self_id

    def change_to_follower(self, term: int, leader_id: str) -> None:
        self._check_term(term)
        self.role, self.leader_id = Role.FOLLOWER, leader_id

    def change_to_candidate(self, term: int) -> None:
        """Become candidate; a larger ``term`` is remembered for the next round, the current term stays."""
        if term < self.current_term:
            raise StoreError(f"{self.self_id}: candidate for term {term} below the current {self.current_term}")
        self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        self.role, self.leader_id = Role.CANDIDATE, None

    def update_ledger_index_and_term(self, index: int, term: int) -> None:
        self.ledger_end_index, self.ledger_end_term = index, term

    def _check_term(self, term: int) -> None:
        if term != self.current_term:
            raise StoreError(f"{self.self_id}: role change for term {term}, but the current term is "
                             f"{self.current_term}")

    def load(self) -> None:
        """Read ``currterm`` if there is one (a missing file is a member that never voted)."""
        if not os.path.exists(self.path):
            return
        props = read_properties(self.path)
        try:
            self.current_term = int(props.get(TERM_KEY, self.current_term))
        except ValueError:
            raise StoreError(f"{self.path}: {TERM_KEY} is {props[TERM_KEY]!r}, not a number") from None
        self.vote_for = props.get(VOTE_FOR_KEY) or None

    def persist(self) -> None:
        write_atomic(self.path, f"{VOTE_FOR_KEY}={self.vote_for or ''}\n{TERM_KEY}={self.current_term}\n")

    def lead_alone(self) -> None:
        """Become leader of a group of one, as DLedger's election does it: vote for itself in the current term
        (unless that vote went to another member, then in the next one) and take the lead. ``currterm`` is written
        only when the vote is new, so that reopening a store changes none of its files."""
        if self.vote_for != self.self_id:
            if self.vote_for is not None:
                self.current_term += 1
            self.vote_for = self.self_id
            self.persist()
        self.role = Role.LEADER
        self.leader_id = self.self_id
