"""ConfigManager: one JSON file per table, written crash-safe and read back with its fallbacks."""

from __future__ import annotations

import os
from typing import Any

import pytest

from broker.common.config_manager import ConfigManager
from broker.common.errors import MetadataCorrupt
from broker.common.fastjson import encode_json_pretty


class Counts(ConfigManager[dict[str, int]]):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.table: dict[str, int] = {}

    def encode(self) -> str:
        return encode_json_pretty({"table": self.table})

    def decode(self, data: Any) -> dict[str, int]:
        return {str(k): int(v) for k, v in data["table"].items()}

    def restore(self, loaded: dict[str, int]) -> None:
        self.table.update(loaded)


def test_no_file_loads_nothing(tmp_path) -> None:
    counts = Counts(str(tmp_path / "config" / "counts.json"))
    assert counts.load() is False and counts.table == {}
    assert counts.config_file_path() == str(tmp_path / "config" / "counts.json")


def test_persist_then_load_round_trips(tmp_path) -> None:
    path = str(tmp_path / "config" / "counts.json")
    counts = Counts(path)
    counts.table["a"] = 1
    counts.persist()
    counts.table["a"] = 2
    counts.persist()  # the first version becomes the .bak
    again = Counts(path)
    assert again.load() is True and again.table == {"a": 2}
    assert os.path.exists(path + ".bak")


def test_a_file_that_does_not_decode_falls_back_to_its_backup(tmp_path) -> None:
    path = str(tmp_path / "counts.json")
    counts = Counts(path)
    counts.table["a"] = 1
    counts.persist()
    counts.persist()
    with open(path, "w") as f:
        f.write('{"table": {"a": "not a number"}}')
    again = Counts(path)
    assert again.load() is True and again.table == {"a": 1}  # decode raised before restore: nothing half-loaded


def test_unreadable_without_a_backup_is_corrupt(tmp_path) -> None:
    path = str(tmp_path / "counts.json")
    with open(path, "w") as f:
        f.write("{not json")
    with pytest.raises(MetadataCorrupt):
        Counts(path).load()
