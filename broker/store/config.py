"""MessageStoreConfig: the store's settings, under RocketMQ's key names and defaults.

Keys are read from a broker properties file in RocketMQ's camelCase (``mappedFileSizeCommitLog``) and kept as
snake_case fields; ``from_properties`` is the only place that converts them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from enum import StrEnum

from broker.common.errors import ConfigError
from broker.common.properties import format_value, parse_fields, to_camel
from broker.store.layout import CQ_UNIT_SIZE, CQ_UNITS_PER_FILE, MAX_HASH_SLOT_NUM, MAX_INDEX_NUM


def parse_peers(peers: str) -> dict[str, str]:
    """DLedger's peers key: ``n0-127.0.0.1:40911;n1-127.0.0.1:40912`` as {id: address}, in order."""
    result: dict[str, str] = {}
    for peer in filter(None, (p.strip() for p in peers.split(";"))):
        peer_id, sep, address = peer.partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not peer_id or not colon or not host or not port.isdigit():
            raise ConfigError(f"dLegerPeers: {peer!r} is not id-host:port")
        if peer_id in result:
            raise ConfigError(f"dLegerPeers: {peer_id} is named twice")
        result[peer_id] = address
    return result


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    """A broker's place in its replication group (RocketMQ's store BrokerRole; the key is read into BrokerConfig)."""

    ASYNC_MASTER = "ASYNC_MASTER"  # acknowledges puts at once, slaves follow behind
    SYNC_MASTER = "SYNC_MASTER"  # acknowledges a put once a slave holds it
    SLAVE = "SLAVE"  # follows a master; refuses writes


class DispatchMode(StrEnum):
    """Where dispatch (CommitLog -> ConsumeQueue + IndexFile) runs once the store is open. PROCESS (the default, the
    broker's): a child process, so that it does not share the broker's GIL with appends and requests. THREAD: a
    thread of the broker process, for embedding the store where a child process is unwelcome."""

    PROCESS = "PROCESS"
    THREAD = "THREAD"


@dataclass(frozen=True, slots=True)
class MessageStoreConfig:
    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str = ""  # "" means {store_path_root_dir}/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = CQ_UNITS_PER_FILE * CQ_UNIT_SIZE
    max_message_size: int = 4 * 1024 * 1024
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log: int = 500  # ms
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000  # ms
    flush_interval_consume_queue: int = 1000  # ms
    sync_flush_timeout: int = 5000  # ms
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"  # hours of the day, "04;05"
    disk_max_used_space_ratio: int = 75  # percent: clean expired files above it at any hour
    disk_space_clean_forcibly_ratio: int = 85  # percent: delete the oldest files even if not expired
    clean_file_forcibly_enable: bool = True  # allow that (DLedger mode: DLedger's enableDiskForceClean)
    disk_space_warning_level_ratio: int = 90  # percent: refuse writes
    clean_resource_interval: int = 10_000  # ms
    delete_commit_log_files_interval: int = 100  # ms between two deleted files
    max_hash_slot_num: int = MAX_HASH_SLOT_NUM
    max_index_num: int = MAX_INDEX_NUM
    message_index_enable: bool = True
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    # A pull whose backlog exceeds this percentage of physical memory is sent to a slave (slaveReadEnable); the
    # broker lowers it by 10 on a slave, as BrokerStartup does.
    access_message_in_memory_max_ratio: int = 40
    flush_delay_offset_interval: int = 10_000  # ms between delayOffset.json writes (the schedule service)
    # -- replication (RocketMQ's DefaultHAService); the broker's role is BrokerConfig.brokerRole
    ha_listen_port: int = 0  # 0 (Java's BrokerStartup default): listenPort + 1
    ha_send_heartbeat_interval: int = 5000  # ms: a slave reports, a master heartbeats, at least this often
    ha_housekeeping_interval: int = 20_000  # ms of silence after which either side drops the connection
    ha_transfer_batch_size: int = 32 * 1024  # bytes a master sends in one frame
    ha_master_address: str = ""  # a slave's master HA address; "" = learn it from the NameServer
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024  # bytes a slave may lag and still count as in sync
    slave_timeout: int = 3000  # ms a SYNC_MASTER put waits for its slaves
    total_replicas: int = 1
    in_sync_replicas: int = 1  # copies (the master's included) a SYNC_MASTER put waits for; rmq waits for 2 at least
    min_in_sync_replicas: int = 1
    enable_auto_in_sync_replicas: bool = False
    dispatch_mode: DispatchMode = DispatchMode.PROCESS  # not a RocketMQ key: Java needs no second process
    # -- DLedger (a Raft group per broker name): the CommitLog is the group's log, under dledger-<selfId>/
    enable_d_leger_commit_log: bool = False
    d_leger_group: str = ""  # the group, RocketMQ's brokerName by convention
    d_leger_peers: str = ""  # "n0-host:port;n1-host:port;..."
    d_leger_self_id: str = ""  # this member's id among the peers
    preferred_leader_id: str = ""  # ids (";"-separated) DLedger hands leadership to when they can take it
    store_path_d_ledger_commit_log: str = ""  # "" means {store_path_root_dir}/dledger-<selfId>/data
    enable_batch_push: bool = False  # a DLedger leader pushes several entries a request
    # rmq's keys for DLedger's timings (Apache's broker has none and runs DLedger's defaults, which these are)
    d_leger_heart_beat_time_interval_ms: int = 2000  # a leader's heartbeat period
    d_leger_max_heart_beat_leak: int = 3  # heartbeat periods a follower waits out before it stands for election
    d_leger_min_vote_interval_ms: int = 300  # a candidate's next vote round: min + random(max - min) ms later
    d_leger_max_vote_interval_ms: int = 1000
    d_leger_max_pending_requests_num: int = 10_000  # appends waiting for their quorum before LEADER_PENDING_FULL
    d_leger_max_batch_push_size: int = 4 * 1024  # bytes of entries in one push (with enableBatchPush)
    # a follower more than 1000 entries and dLegerPeerPushThrottlePoint bytes behind is pushed dLegerPeerPushQuota
    # bytes a second at most
    d_leger_peer_push_throttle_point: int = 300 * 1024 * 1024
    d_leger_peer_push_quota: int = 20 * 1024 * 1024

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def d_leger_peer_map(self) -> dict[str, str]:
        """dLegerPeers as {id: "host:port"}; ConfigError when a peer is not ``id-host:port``."""
        return parse_peers(self.d_leger_peers)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageStoreConfig:
        """Take the keys this config knows from a properties mapping (others are the broker's business)."""
        return dataclasses.replace(cls(), **parse_fields(cls, props))

    def to_properties(self) -> dict[str, str]:
        return {to_camel(f.name): format_value(getattr(self, f.name)) for f in dataclasses.fields(self)}


