"""Small state files: atomic writes and Kafka's text formats, on real files."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    base64url_to_uuid,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    uuid_to_base64url,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
    write_text_atomically,
)
from storage.errors import LogDirOfflineError, StorageError
from storage.types import TopicPartition

# --------------------------------------------------------------------------- atomic writes


def test_atomic_write_creates_file_and_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "state"
    write_text_atomically(target, "hello\n")
    assert target.read_text() == "hello\n"
    assert os.listdir(tmp_path) == ["state"]


def test_atomic_write_replaces_previous_content_and_stale_tmp(tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.write_text("old content that is longer\n")
    (tmp_path / "state.tmp").write_text("garbage left by a crash mid-write")
    write_text_atomically(target, "new\n")
    assert target.read_text() == "new\n"
    assert not (tmp_path / "state.tmp").exists()


def test_atomic_write_fsyncs_file_before_rename_and_dir_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_text_atomically(tmp_path / "state", "x")
    assert events == ["fsync-file", "replace", "fsync-dir"]


def test_atomic_write_failure_raises_log_dir_offline_and_cleans_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(LogDirOfflineError, match="state"):
        write_text_atomically(tmp_path / "state", "x")
    assert os.listdir(tmp_path) == []


def test_atomic_write_into_missing_dir_raises_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        write_text_atomically(tmp_path / "missing" / "state", "x")


# --------------------------------------------------------------------------- offset checkpoints


def test_checkpoint_file_names_are_kafkas() -> None:
    assert RECOVERY_POINT_CHECKPOINT == "recovery-point-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT == "log-start-offset-checkpoint"
    assert CLEANER_OFFSET_CHECKPOINT == "cleaner-offset-checkpoint"


def test_offset_checkpoint_round_trip_and_exact_text(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    offsets = {
        TopicPartition("orders", 1): 987,
        TopicPartition("orders", 0): 1234,
        TopicPartition("__consumer_offsets", 12): 0,
        TopicPartition("a.b-c_d", 3): (1 << 63) - 1,
    }
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets
    assert path.read_text() == (
        "0\n4\n__consumer_offsets 12 0\na.b-c_d 3 9223372036854775807\norders 0 1234\norders 1 987\n"
    )


def test_offset_checkpoint_empty_map(tmp_path: Path) -> None:
    path = tmp_path / LOG_START_OFFSET_CHECKPOINT
    write_offset_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offset_checkpoint(path) == {}


def test_offset_checkpoint_missing_or_empty_file_is_empty(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path / "nope") == {}
    (tmp_path / "empty").write_text("")  # Kafka creates its checkpoint files empty
    assert read_offset_checkpoint(tmp_path / "empty") == {}


def test_offset_checkpoint_reads_kafka_whitespace_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    path.write_text("0\r\n2\r\nt  0\t5\r\nt 1 -1\r\n")
    assert read_offset_checkpoint(path) == {TopicPartition("t", 0): 5, TopicPartition("t", 1): -1}


@pytest.mark.parametrize(
    ("text", "line_no"),
    [
        ("1\n0\n", 1),  # unknown version
        ("zero\n0\n", 1),
        ("0\n", 2),  # count missing
        ("0\nmany\n", 2),
        ("0\n2\nt 0 5\n", None),  # fewer entries than announced
        ("0\n1\nt 0 5\nt 1 6\n", None),  # more entries than announced
        ("0\n1\nt 0\n", 3),  # two fields
        ("0\n1\nt 0 5 extra\n", 3),
        ("0\n1\nt x 5\n", 3),
        ("0\n1\nt 0 five\n", 3),
        ("0\n1\nt 0 1_000\n", 3),  # int() would accept this; Kafka would not
        ("0\n1\nt -1 5\n", 3),  # negative partition
        ("0\n1\nt 0 9223372036854775808\n", 3),  # offset beyond int64
        ("0\n2\nt 0 5\n\nt 1 5\n", 4),  # blank line in the middle
    ],
)
def test_malformed_offset_checkpoint_raises_storage_error(tmp_path: Path, text: str, line_no: int | None) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_text(text)
    with pytest.raises(StorageError) as info:
        read_offset_checkpoint(path)
    message = str(info.value)
    assert str(path) in message
    if line_no is not None:
        assert f"line {line_no}" in message


def test_offset_checkpoint_refuses_to_write_what_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    with pytest.raises(ValueError, match="topic"):
        write_offset_checkpoint(path, {TopicPartition("has space", 0): 1})
    with pytest.raises(ValueError, match="offset"):
        write_offset_checkpoint(path, {TopicPartition("t", 0): 1 << 63})
    with pytest.raises(ValueError, match="partition"):
        write_offset_checkpoint(path, {TopicPartition("t", -1): 0})
    assert not path.exists()


def test_offset_checkpoint_unreadable_file_is_log_dir_offline(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.mkdir()  # reading a directory fails with EISDIR: an I/O error, not a format error
    with pytest.raises(LogDirOfflineError):
        read_offset_checkpoint(path)


# --------------------------------------------------------------------------- leader epochs


def test_leader_epoch_checkpoint_round_trip_and_text(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    entries = [(0, 0), (3, 4521), (7, 10000)]
    write_leader_epoch_checkpoint(path, entries)
    assert path.read_text() == "0\n3\n0 0\n3 4521\n7 10000\n"
    assert read_leader_epoch_checkpoint(path) == entries


def test_leader_epoch_checkpoint_missing_is_empty(tmp_path: Path) -> None:
    assert read_leader_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint") == []


@pytest.mark.parametrize("text", ["1\n0\n", "0\n1\n0\n", "0\n1\n0 1 2\n", "0\n1\n-1 5\n", "0\n2\n0 0\n"])
def test_malformed_leader_epoch_checkpoint(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(StorageError, match="leader-epoch-checkpoint"):
        read_leader_epoch_checkpoint(path)


# --------------------------------------------------------------------------- partition.metadata


def test_uuid_base64url_matches_kafkas_text_form() -> None:
    assert uuid_to_base64url(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_to_base64url(uuid.UUID(bytes=b"\xff" * 16)) == "_" * 21 + "w"
    some = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    assert base64url_to_uuid(uuid_to_base64url(some)) == some
    for bad in ["", "short", "A" * 23, "A" * 21 + "=", "_" * 22]:  # "_"*22 sets bits past 128
        with pytest.raises(ValueError):
            base64url_to_uuid(bad)


def test_partition_metadata_round_trip_and_text(tmp_path: Path) -> None:
    topic_id = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    write_partition_metadata(tmp_path, topic_id)
    text = (tmp_path / PARTITION_METADATA).read_text()
    assert text == f"version: 0\ntopic_id: {uuid_to_base64url(topic_id)}\n"
    assert read_partition_metadata(tmp_path) == topic_id


def test_partition_metadata_reads_kafkas_file_without_final_newline(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    (tmp_path / PARTITION_METADATA).write_text(f"version: 0\ntopic_id: {uuid_to_base64url(topic_id)}")
    assert read_partition_metadata(tmp_path) == topic_id


def test_partition_metadata_missing_is_none(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "version: 0\n",
        "version 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "version: 0\ntopicid: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "version: 0\ntopic_id: not-a-uuid\n",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",  # the zero UUID
    ],
)
def test_malformed_partition_metadata(tmp_path: Path, text: str) -> None:
    (tmp_path / PARTITION_METADATA).write_text(text)
    with pytest.raises(StorageError, match=PARTITION_METADATA):
        read_partition_metadata(tmp_path)


def test_partition_metadata_rejects_zero_topic_id_on_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_partition_metadata(tmp_path, uuid.UUID(int=0))


# --------------------------------------------------------------------------- meta.properties


def test_meta_properties_round_trip(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, "MkU3OEVBNTcwNTJENDM2Qk", 3)
    assert read_meta_properties(tmp_path) == {"version": "1", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk", "node.id": "3"}
    lines = (tmp_path / META_PROPERTIES).read_text().splitlines()
    assert lines[0].startswith("#")
    assert lines[1:] == ["version=1", "cluster.id=MkU3OEVBNTcwNTJENDM2Qk", "node.id=3"]


def test_meta_properties_with_directory_id(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, "cluster-1", 0, directory_id="J8aAPcfLQt2bqs1JT_rMgQ")
    props = read_meta_properties(tmp_path)
    assert props is not None and props["directory.id"] == "J8aAPcfLQt2bqs1JT_rMgQ"


def test_meta_properties_missing_is_none(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None


def test_meta_properties_reads_java_written_file(tmp_path: Path) -> None:
    (tmp_path / META_PROPERTIES).write_text(
        "#\n#Thu Nov 21 10:15:02 UTC 2024\n"
        "node.id=1\n"
        "directory.id=J8aAPcfLQt2bqs1JT_rMgQ\n"
        "version=1\n"
        "  ! another comment style\n"
        "\n"
        "cluster.id : abc\\=def\n"
        "odd\\ key value with spaces\n"
    )
    assert read_meta_properties(tmp_path) == {
        "node.id": "1",
        "directory.id": "J8aAPcfLQt2bqs1JT_rMgQ",
        "version": "1",
        "cluster.id": "abc=def",
        "odd key": "value with spaces",
    }


def test_meta_properties_malformed_line(tmp_path: Path) -> None:
    (tmp_path / META_PROPERTIES).write_text("version=1\njustakey\n")
    with pytest.raises(StorageError, match="line 2"):
        read_meta_properties(tmp_path)


@pytest.mark.parametrize(("cluster_id", "node_id"), [("has space", 1), ("a=b", 1), ("", 1), ("ok", -1)])
def test_meta_properties_rejects_values_needing_escapes(tmp_path: Path, cluster_id: str, node_id: int) -> None:
    with pytest.raises(ValueError):
        write_meta_properties(tmp_path, cluster_id, node_id)
    assert not (tmp_path / META_PROPERTIES).exists()
