"""Typed numbers and small values shared by every storage module.

Absolute offsets, offsets relative to a segment's base, byte positions in a file and
leader epochs are all ints on the wire; mixing them up is the classic index/segment
bug, so each gets its own NewType (mypy keeps them apart, the runtime cost is nil).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, NewType

Offset = NewType("Offset", int)
"""Absolute offset of a record in a partition."""

RelativeOffset = NewType("RelativeOffset", int)
"""Offset minus the base offset of the segment holding it (u32 in index files)."""

Position = NewType("Position", int)
"""Byte position inside one segment file."""

LeaderEpoch = NewType("LeaderEpoch", int)
"""Leader epoch stamped into partitionLeaderEpoch of each appended batch."""

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1


class TopicPartition(NamedTuple):
    """A partition's name. A NamedTuple, not a frozen dataclass like the other values:
    it is the key of every per-partition dict on the data path (owner, logs, purgatory,
    watchers), and a tuple hashes and compares in C. The dataclass's generated
    ``__hash__``/``__eq__`` ran in Python, and a 1,000-partition fetch hashes each key
    several times (docs/ARCHITECTURE.md, "Hot-path value types")."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """The partition's directory name under log.dirs, as Kafka names it."""
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> "TopicPartition":
        """Parse ``<topic>-<partition>``; topics may themselves contain '-'."""
        topic, sep, partition = name.rpartition("-")
        if not sep or not topic or not partition.isdigit():
            raise ValueError(f"not a topic-partition directory name: {name!r}")
        return cls(topic, int(partition))


_PARTITIONS_OF: dict[str, list[TopicPartition]] = {}


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    """``TopicPartition(topic, p)`` for p < count, made once per process and reused.

    A NamedTuple's constructor runs in Python (a generated lambda): a Fetch of 1,000
    partitions made 1,000 of them per request, 4% of a worker's samples in the
    1,000-partition benchmark. The list only grows (partitions are only ever added);
    entries for a deleted topic stay, which is harmless, as equal names are equal keys."""
    known = _PARTITIONS_OF.get(topic)
    if known is None:
        known = _PARTITIONS_OF[topic] = []
    if len(known) < count:
        known.extend(TopicPartition(topic, p) for p in range(len(known), count))
    return known


@dataclass(frozen=True, slots=True)
class FileRange:
    """Where fetched bytes live: hand ``fd``, ``position``, ``length`` to os.sendfile.

    ``fd`` stays open at least until the segment is deleted and its file.delete.delay.ms
    grace period ends, so a reader holding an older segment-list snapshot can finish.
    """

    fd: int
    path: str
    position: Position
    length: int
    inode: int = 0  # of the file behind ``fd`` (0: not known); lets readers skip an fstat
