"""A checker for Kafka workload histories, after Jepsen's "kafka" workload (jepsen-io/jepsen).

Writers send unique values to (topic, partition) keys; each send ends acknowledged at an
offset, definitely failed, or indeterminate (timed out: it may or may not be in the log).
Readers record what they polled, in the order they saw it. At the end a full read of every
key from offset 0 gives the log as it finally is, and ``check()`` compares the three:

- lost: acknowledged, yet absent from the final log (an ack is a durability promise);
- duplicated: one value at several positions of the final log (any keys: a retried send
  that the idempotent producer should have deduplicated, or a value that leaked to another key);
- moved: the final offset differs from the acked offset, or from the offset a reader saw it
  at (offsets are identities in Kafka: consumers commit them);
- phantom: read or in the final log, but never sent to that key (corruption, cross-talk);
- uncommitted_reads: read, but absent from the final log (a read of data that was later
  truncated, i.e. served before it was committed; a never-sent value read and then gone is
  both phantom and an uncommitted read);
- nonmonotonic: one reader, between restarts, seeing one key's offsets not strictly increasing;
- failed_but_present: definitely failed, yet in the final log (a definite failure from an
  idempotent producer means "not written"; indeterminate sends may go either way).

Offset gaps are not flagged: compaction, aborted transactions and control batches leave them.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Union

Key = tuple[str, int]  # (topic, partition)
Value = Union[str, int]


@dataclass(frozen=True)
class Anomaly:
    key: Key
    value: Value
    detail: str

    def __str__(self) -> str:
        return f"{self.key[0]}[{self.key[1]}] {self.value!r}: {self.detail}"


@dataclass
class Report:
    lost: list[Anomaly] = field(default_factory=list)
    duplicated: list[Anomaly] = field(default_factory=list)
    moved: list[Anomaly] = field(default_factory=list)
    phantom: list[Anomaly] = field(default_factory=list)
    uncommitted_reads: list[Anomaly] = field(default_factory=list)
    nonmonotonic: list[Anomaly] = field(default_factory=list)
    failed_but_present: list[Anomaly] = field(default_factory=list)
    acked: int = 0
    failed: int = 0
    indeterminate: int = 0
    reads: int = 0
    final_records: int = 0

    KINDS = ("lost", "duplicated", "moved", "phantom", "uncommitted_reads", "nonmonotonic", "failed_but_present")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, kind) for kind in self.KINDS)

    def summary(self, examples: int = 3) -> str:
        lines = [
            f"{'OK' if self.ok else 'VIOLATIONS'}: acked={self.acked} failed={self.failed} "
            f"indeterminate={self.indeterminate} reads={self.reads} final_records={self.final_records}"
        ]
        for kind in self.KINDS:
            found: list[Anomaly] = getattr(self, kind)
            if found:
                lines.append(f"  {kind}: {len(found)}")
                lines.extend(f"    {a}" for a in found[:examples])
                if len(found) > examples:
                    lines.append(f"    ... and {len(found) - examples} more")
        return "\n".join(lines)


class History:
    """Records a workload's events (from any thread: producer callbacks run on the client's
    own threads) and checks them against the final logs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acks: list[tuple[Key, Value, int]] = []
        self._failed: set[tuple[Key, Value]] = set()
        self._info: set[tuple[Key, Value]] = set()
        # Reads and restarts share one list: a restart only means something in its place
        # among the same reader's reads.
        # A restart is an event with no offset.
        self._reader_events: list[tuple[str, Key | None, int | None, Value]] = []
        self._final: dict[Key, list[tuple[int, Value]]] = {}

    def ack(self, key: Key, value: Value, offset: int) -> None:
        with self._lock:
            self._acks.append((key, value, offset))

    def fail(self, key: Key, value: Value) -> None:
        with self._lock:
            self._failed.add((key, value))

    def info(self, key: Key, value: Value) -> None:
        with self._lock:
            self._info.add((key, value))

    def read(self, reader_id: str, key: Key, offset: int, value: Value) -> None:
        with self._lock:
            self._reader_events.append((reader_id, key, offset, value))

    def reader_restarted(self, reader_id: str, key: Key | None = None) -> None:
        """The reader's position was reset (new assignment, seek): of one key, or of all."""
        with self._lock:
            self._reader_events.append((reader_id, key, None, ""))

    def final(self, key: Key, records: Iterable[tuple[int, Value]]) -> None:
        with self._lock:
            self._final[key] = list(records)

    def check(self) -> Report:
        with self._lock:
            acks = list(self._acks)
            failed, info = set(self._failed), set(self._info)
            events = list(self._reader_events)
            final = {k: list(v) for k, v in self._final.items()}
        acked = {(k, v) for k, v, _ in acks}
        sent = acked | failed | info
        # A send both acked and failed (or timed out) counts once, by its strongest outcome.
        report = Report(acked=len(acked), failed=len(failed - acked), indeterminate=len(info - acked - failed))
        report.final_records = sum(len(records) for records in final.values())

        # Where each value finally is: per key, and across keys for duplicates.
        offsets_in: dict[tuple[Key, Value], list[int]] = defaultdict(list)
        places: dict[Value, list[tuple[Key, int]]] = defaultdict(list)
        for key, records in final.items():
            for offset, value in records:
                offsets_in[(key, value)].append(offset)
                places[value].append((key, offset))

        for value, where in places.items():
            if len(where) > 1:
                text = ", ".join(f"{k[0]}[{k[1]}]@{o}" for k, o in where)
                report.duplicated.append(Anomaly(where[0][0], value, f"at {len(where)} positions: {text}"))
        for (key, value), offsets in offsets_in.items():
            if (key, value) not in sent:
                report.phantom.append(Anomaly(key, value, f"in the final log at {offsets}, never sent"))
            elif (key, value) in failed and (key, value) not in acked:
                report.failed_but_present.append(Anomaly(key, value, f"definitely failed, yet in the final log at {offsets}"))

        for key, value, acked_at in acks:
            finally_at = offsets_in.get((key, value))
            if not finally_at:
                report.lost.append(Anomaly(key, value, f"acked at offset {acked_at}, absent from the final log"))
            elif acked_at not in finally_at:
                report.moved.append(Anomaly(key, value, f"acked at offset {acked_at}, finally at {finally_at}"))

        last: dict[tuple[str, Key], int] = {}  # (reader, key) -> last offset read since a restart
        for reader, key_or_none, read_at, value in events:
            if read_at is None:  # a restart: forget this reader's positions (of one key or of all)
                for rk in [rk for rk in last if rk[0] == reader and key_or_none in (None, rk[1])]:
                    del last[rk]
                continue
            assert key_or_none is not None  # reads always name their key
            key, offset = key_or_none, read_at
            report.reads += 1
            previous = last.get((reader, key))
            if previous is not None and offset <= previous:
                report.nonmonotonic.append(Anomaly(key, value, f"reader {reader} read offset {offset} after {previous}"))
            last[(reader, key)] = offset
            seen_at = offsets_in.get((key, value))
            if (key, value) not in sent:
                report.phantom.append(Anomaly(key, value, f"read by {reader} at offset {offset}, never sent"))
            if not seen_at:
                report.uncommitted_reads.append(
                    Anomaly(key, value, f"read by {reader} at offset {offset}, absent from the final log")
                )
            elif offset not in seen_at:
                report.moved.append(Anomaly(key, value, f"read by {reader} at offset {offset}, finally at {seen_at}"))
        return report
