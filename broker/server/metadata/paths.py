"""Where the broker's metadata files live under storePathRootDir (BrokerPathConfigHelper)."""

from __future__ import annotations

import os


def config_dir(store_path_root_dir: str) -> str:
    return os.path.join(store_path_root_dir, "config")


def topic_config_path(store_path_root_dir: str) -> str:
    return os.path.join(config_dir(store_path_root_dir), "topics.json")


def subscription_group_path(store_path_root_dir: str) -> str:
    return os.path.join(config_dir(store_path_root_dir), "subscriptionGroup.json")


def consumer_offset_path(store_path_root_dir: str) -> str:
    return os.path.join(config_dir(store_path_root_dir), "consumerOffset.json")


def delay_offset_path(store_path_root_dir: str) -> str:
    """ScheduleMessageService's per-delay-level progress (written by the schedule service, not here)."""
    return os.path.join(config_dir(store_path_root_dir), "delayOffset.json")
