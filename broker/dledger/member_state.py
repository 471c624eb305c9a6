"""What a DLedger member keeps of its election: its term and whom it voted for, in ``<member dir>/currterm``.

MemberState.persistTerm writes ``voteLeader=<id>`` and ``currTerm=<n>`` (that order: Java's Properties hash order);
loadTerm reads either key if present. A member of a group of one votes for itself in the term it has: DLedger's
first candidate round does not raise the term, so such a member stays in term 0 across restarts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
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

    @property
    def path(self) -> str:
        return os.path.join(self.directory, TERM_PERSIST_FILE)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

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
