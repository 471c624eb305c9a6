"""DLedgerConfig: what a member of a DLedger group needs to elect, under DLedger's names and defaults.

The group, peers and self id come from the broker's keys (``dLegerGroup``, ``dLegerPeers``, ``dLegerSelfId``,
``preferredLeaderId``), as Apache's DLedgerCommitLog hands them over. Apache's broker passes no timings, so its
members run on DLedger's defaults; ours read them from rmq's own keys (``dLegerHeartBeatTimeIntervalMs``,
``dLegerMaxHeartBeatLeak``, ``dLegerMinVoteIntervalMs``, ``dLegerMaxVoteIntervalMs``, ``dLegerMaxPendingRequestsNum``,
``dLegerMaxBatchPushSize``, ``dLegerPeerPushThrottlePoint``, ``dLegerPeerPushQuota``), whose defaults are DLedger's.
Retention's keys (fileReservedHours, deleteWhen, ...) come from the broker's as Apache's does it (``retention``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.common.errors import ConfigError
from broker.dledger.retention import RetentionSettings
from broker.store.config import MessageStoreConfig


@dataclass(frozen=True, slots=True)
class DLedgerConfig:
    group: str
    self_id: str
    peers: dict[str, str] = field(default_factory=dict)  # {id: "host:port"}, self included
    store_base_dir: str = ""
    enable_leader_elector: bool = True
    heart_beat_time_interval_ms: int = 2000  # a leader's heartbeat period
    max_heart_beat_leak: int = 3  # periods without a heartbeat (or its quorum of answers) before a new election
    min_vote_interval_ms: int = 300  # a candidate's next round comes min + random(max - min) ms later
    max_vote_interval_ms: int = 1000
    preferred_leader_ids: str = ""  # only leadership transfer uses it, which rmq does not do yet
    # the log and its replication
    mapped_file_size_for_entry_data: int = 1024 * 1024 * 1024  # RocketMQ passes mappedFileSizeCommitLog
    mapped_file_size_for_entry_index: int = 32 * 5 * 1024 * 1024
    max_pending_requests_num: int = 10000  # appends waiting for their quorum, beyond which LEADER_PENDING_FULL
    max_wait_ack_time_ms: int = 2500  # an append without its quorum by then fails: WAIT_QUORUM_ACK_TIMEOUT
    max_push_time_out_ms: int = 1000  # an unanswered push is sent again after this
    enable_batch_push: bool = False  # RocketMQ's enableBatchPush: several entries a push
    max_batch_push_size: int = 4 * 1024  # a batch push is sent once its entries reach these bytes
    # a follower more than 1000 entries and this many bytes behind gets at most peer_push_quota bytes a second
    peer_push_throttle_point: int = 300 * 1024 * 1024
    peer_push_quota: int = 20 * 1024 * 1024
    flush_file_interval_ms: int = 10
    check_point_interval_ms: int = 3000  # the committed index goes to ``checkpoint`` this often
    retention: RetentionSettings = field(default_factory=RetentionSettings)  # fileReservedHours, deleteWhen, ...

    def __post_init__(self) -> None:
        if not self.group:
            raise ConfigError("dLegerGroup is empty")
        if self.self_id not in self.peers:
            raise ConfigError(f"dLegerSelfId {self.self_id!r} is not among dLegerPeers {sorted(self.peers)}")
        if not 0 <= self.min_vote_interval_ms < self.max_vote_interval_ms:
            raise ConfigError(f"dLegerMinVoteIntervalMs {self.min_vote_interval_ms} must be at least 0 and below "
                              f"dLegerMaxVoteIntervalMs {self.max_vote_interval_ms}")
        for key, value in (("dLegerHeartBeatTimeIntervalMs", self.heart_beat_time_interval_ms),
                           ("dLegerMaxHeartBeatLeak", self.max_heart_beat_leak),
                           ("dLegerMaxPendingRequestsNum", self.max_pending_requests_num),
                           ("dLegerMaxBatchPushSize", self.max_batch_push_size),
                           ("dLegerPeerPushThrottlePoint", self.peer_push_throttle_point),
                           ("dLegerPeerPushQuota", self.peer_push_quota)):
            if value <= 0:
                raise ConfigError(f"{key} must be positive, not {value}")
        for name in ("max_wait_ack_time_ms", "max_push_time_out_ms", "flush_file_interval_ms",
                     "check_point_interval_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")

    @property
    def self_address(self) -> str:
        return self.peers[self.self_id]

    @classmethod
    def from_store_config(cls, store: MessageStoreConfig) -> DLedgerConfig:
        """The broker's DLedger keys, Apache's and rmq's timings; ConfigError naming the key that is bad."""
        return cls(group=store.d_leger_group, self_id=store.d_leger_self_id, peers=store.d_leger_peer_map,
                   store_base_dir=store.store_path_root_dir, preferred_leader_ids=store.preferred_leader_id,
                   mapped_file_size_for_entry_data=store.mapped_file_size_commit_log,
                   enable_batch_push=store.enable_batch_push,
                   retention=RetentionSettings.from_store_config(store),
                   heart_beat_time_interval_ms=store.d_leger_heart_beat_time_interval_ms,
                   max_heart_beat_leak=store.d_leger_max_heart_beat_leak,
                   min_vote_interval_ms=store.d_leger_min_vote_interval_ms,
                   max_vote_interval_ms=store.d_leger_max_vote_interval_ms,
                   max_pending_requests_num=store.d_leger_max_pending_requests_num,
                   max_batch_push_size=store.d_leger_max_batch_push_size,
                   peer_push_throttle_point=store.d_leger_peer_push_throttle_point,
                   peer_push_quota=store.d_leger_peer_push_quota)


def slave_broker_id(self_id: str) -> int:
    """The brokerId a member registers with as a slave (Apache's DLedgerCommitLog.getId): the number after the self
    id's first character, plus one (n0: 1, n2: 3); a leader registers as 0. ConfigError for an id of another form,
    where Apache's broker fails to start."""
    number = self_id[1:]
    if not number.isdigit() or not number.isascii():
        raise ConfigError(f"dLegerSelfId {self_id!r} must be a letter and a number (n0, n1, ...): a follower's "
                          "brokerId is that number + 1")
    return int(number) + 1
