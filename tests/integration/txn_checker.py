"""A checker for transactional Kafka workloads, after Jepsen's Kafka transaction tests.

The client records every transaction it ran: its id (naming the producer and the transaction
number), the unique values it wrote to each partition and how it ended:

- committed: commit_transaction returned; every value must be read by read_committed, once;
- aborted: abort_transaction returned; no value of it may ever be read by read_committed;
- indeterminate: an error or a timeout left the outcome unknown; either is allowed, but all or
  nothing: the transaction's values are read from every partition it wrote, or from none.

A consume-transform-produce stage writes, in its transactions, one output per input record it
consumed (the output names its input's partition and offset) and sends the consumer's offsets
to the transaction. After the run everything is read back to the end (read_committed, and
read_uncommitted for diagnostics) and the group's committed offsets fetched; ``check()`` then
finds (each kind a list of ``Anomaly``, each naming the transaction and the partitions):

- aborted_read: a value of an aborted transaction read by read_committed (at the end, or by the
  stage during the run);
- lost: a value of a committed transaction missing from read_committed;
- duplicated: one value at several positions (any partitions);
- partial: a transaction whose values are read from some of its partitions and not others;
- phantom: a value read that no transaction wrote to that partition;
- reordered: one producer's transactions read from a partition out of the order it ran them
  (a producer's writes to a partition keep their order in Kafka);
- unstable_read: the stage (a read_committed consumer, during the run) consumed a value at an
  offset where the final read_committed log does not have it (data it saw was rolled back or
  moved); a consumed value of an aborted transaction is an aborted_read;
- offsets: the group's committed offsets disagree with the outputs: an input record below the
  committed offset without exactly one output, or an output of an input at or above it, or an
  output that names an input record that is not there (another value, or none).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

Key = tuple[str, int]  # (topic, partition)
COMMITTED, ABORTED, INDETERMINATE = "committed", "aborted", "indeterminate"
OUTCOMES = (COMMITTED, ABORTED, INDETERMINATE)


def name(key: Key) -> str:
    return f"{key[0]}[{key[1]}]"


@dataclass(frozen=True)
class Anomaly:
    txn: str  # the transaction's id ("" for a value no transaction wrote)
    partitions: tuple[Key, ...]
    detail: str

    def __str__(self) -> str:
        where = ", ".join(name(k) for k in self.partitions)
        return f"{self.txn or '(no transaction)'} on {where}: {self.detail}"


@dataclass
class Txn:
    id: str
    writes: dict[Key, list[str]]
    outcome: str = INDETERMINATE
    # Outputs of a consume-transform-produce transaction: output value -> (input partition,
    # input offset, input value).
    sources: dict[str, tuple[Key, int, str]] = field(default_factory=dict)
    error: str = ""
    producer: str = ""  # who ran it ("p1" for "p1-t7"), and its place among that producer's transactions
    sequence: int = 0


@dataclass
class Report:
    aborted_read: list[Anomaly] = field(default_factory=list)
    lost: list[Anomaly] = field(default_factory=list)
    duplicated: list[Anomaly] = field(default_factory=list)
    partial: list[Anomaly] = field(default_factory=list)
    phantom: list[Anomaly] = field(default_factory=list)
    reordered: list[Anomaly] = field(default_factory=list)
    unstable_read: list[Anomaly] = field(default_factory=list)
    offsets: list[Anomaly] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    # How each indeterminate transaction turned out (diagnostics, not a violation): its id,
    # "visible" or "invisible" (or "partial"), and the error that left it unknown.
    resolved: list[str] = field(default_factory=list)

    KINDS = ("aborted_read", "lost", "duplicated", "partial", "phantom", "reordered", "unstable_read", "offsets")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, kind) for kind in self.KINDS)

    def summary(self, examples: int = 5) -> str:
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        lines = [f"{'OK' if self.ok else 'VIOLATIONS'}: {counts}"]
        for kind in self.KINDS:
            found: list[Anomaly] = getattr(self, kind)
            if found:
                lines.append(f"  {kind}: {len(found)}")
                lines.extend(f"    {a}" for a in found[:examples])
                if len(found) > examples:
                    lines.append(f"    ... and {len(found) - examples} more")
        if self.resolved:
            lines.append(f"  indeterminate, as they turned out: {len(self.resolved)}")
            lines.extend(f"    {r}" for r in self.resolved[:examples])
        return "\n".join(lines)


class TxnHistory:
    """What the clients did (transactions, by ``begin`` and ``end``) and what the final reads
    found; ``check()`` judges them together."""

    def __init__(self) -> None:
        self.txns: dict[str, Txn] = {}
        self.committed_log: dict[Key, list[tuple[int, str]]] = {}
        self.uncommitted_log: dict[Key, list[tuple[int, str]]] = {}
        self.group_offsets: dict[Key, int] = {}
        self.input_keys: set[Key] = set()  # the partitions the consume-transform-produce stage reads

    def begin(self, txn_id: str, writes: dict[Key, list[str]],
              sources: dict[str, tuple[Key, int, str]] | None = None) -> Txn:
        """A transaction about to run: until ``end`` names its outcome it is indeterminate."""
        assert txn_id not in self.txns, f"transaction {txn_id} begun twice"
        producer = txn_id.rsplit("-t", 1)[0]
        sequence = sum(1 for t in self.txns.values() if t.producer == producer)
        txn = Txn(txn_id, {k: list(v) for k, v in writes.items()}, INDETERMINATE, dict(sources or {}), "", producer,
                  sequence)
        self.txns[txn_id] = txn
        return txn

    def end(self, txn_id: str, outcome: str, error: str = "") -> None:
        assert outcome in OUTCOMES, outcome
        self.txns[txn_id].outcome, self.txns[txn_id].error = outcome, error

    def final(self, key: Key, committed: Iterable[tuple[int, str]],
              uncommitted: Iterable[tuple[int, str]] | None = None) -> None:
        """A partition read from offset 0 to its end: by read_committed (to the last stable
        offset, once no transaction was open), and by read_uncommitted (for diagnostics)."""
        self.committed_log[key] = list(committed)
        if uncommitted is not None:
            self.uncommitted_log[key] = list(uncommitted)

    def offsets(self, committed: dict[Key, int]) -> None:
        """The consume-transform-produce group's committed offsets (absent: nothing committed)."""
        self.group_offsets = dict(committed)
        self.input_keys |= set(committed)

    # ------------------------------------------------------------------ the judgement
    def check(self) -> Report:
        report = Report()
        writer: dict[tuple[Key, str], Txn] = {}
        for txn in self.txns.values():
            for key, values in txn.writes.items():
                for value in values:
                    writer[(key, value)] = txn
        found: dict[str, list[tuple[Key, int]]] = defaultdict(list)  # value -> every (partition, offset) read
        for key, records in self.committed_log.items():
            for offset, value in records:
                found[value].append((key, offset))
        seen_uncommitted = {(key, value) for key, records in self.uncommitted_log.items() for _o, value in records}
        counts: dict[str, int] = defaultdict(int)
        for txn in self.txns.values():
            counts[txn.outcome] += 1
        counts["records"] = sum(len(r) for r in self.committed_log.values())

        for value, where in sorted(found.items()):
            if len(where) > 1:
                first = writer.get((where[0][0], value))
                places = ", ".join(f"{name(k)}@{o}" for k, o in where)
                report.duplicated.append(Anomaly(first.id if first else "", tuple(k for k, _o in where),
                                                 f"{value!r} read {len(where)} times: {places}"))
            for key, offset in where:
                if (key, value) not in writer:
                    report.phantom.append(Anomaly("", (key,), f"{value!r} read at {name(key)}@{offset}, "
                                                              "never written there by any transaction"))

        for txn in self.txns.values():
            present: list[tuple[Key, str]] = []
            missing: list[tuple[Key, str]] = []
            for key, values in sorted(txn.writes.items()):
                for value in values:
                    (present if any(k == key for k, _o in found.get(value, ())) else missing).append((key, value))
            keys_present = tuple(sorted({k for k, _v in present}))
            keys_missing = tuple(sorted({k for k, _v in missing}))
            if txn.outcome == ABORTED and any((k, v) in seen_uncommitted for k, vs in txn.writes.items() for v in vs):
                counts["aborted_in_log"] += 1  # its data reached the log: read_committed had to skip it
            if txn.outcome == ABORTED and present:
                at = ", ".join(f"{v!r}@{name(k)}" for k, v in present)
                report.aborted_read.append(Anomaly(txn.id, keys_present, f"aborted, yet read_committed read {at}"))
            if txn.outcome == COMMITTED and missing:
                detail = ", ".join(f"{v!r} from {name(k)}" + (" (read_uncommitted has it)"
                                                              if (k, v) in seen_uncommitted else "")
                                   for k, v in missing)
                report.lost.append(Anomaly(txn.id, keys_missing, f"committed, yet missing: {detail}"))
            if txn.outcome == INDETERMINATE:
                turned = "partial" if present and missing else "visible" if present else "invisible"
                report.resolved.append(f"{txn.id}: {turned} ({txn.error or 'never ended'})")
                counts[f"indeterminate_{turned}"] += 1
            if present and missing:
                report.partial.append(Anomaly(
                    txn.id, tuple(sorted(set(keys_present) | set(keys_missing))),
                    f"{txn.outcome}{' (' + txn.error + ')' if txn.error else ''}, not all-or-nothing: read from "
                    f"{', '.join(map(name, keys_present))}; missing {len(missing)} value(s) from "
                    f"{', '.join(map(name, keys_missing))}"))
        report.counts = dict(counts)
        self._check_order(report, writer)
        self._check_live_reads(report, writer, found)
        self._check_offsets(report, found)
        return report

    def _check_order(self, report: Report, writer: dict[tuple[Key, str], Txn]) -> None:
        for key, records in sorted(self.committed_log.items()):
            last: dict[str, tuple[Txn, int]] = {}  # producer -> its latest transaction read here, at which offset
            for offset, value in records:
                txn = writer.get((key, value))
                if txn is None:
                    continue
                before = last.get(txn.producer)
                if before is not None and before[0].sequence > txn.sequence:
                    report.reordered.append(Anomaly(txn.id, (key,), f"{value!r} at {name(key)}@{offset}, after "
                                                                    f"{before[0].id}'s value at @{before[1]}, which "
                                                                    f"{txn.producer} ran later"))
                last[txn.producer] = (txn, offset)

    def _check_live_reads(self, report: Report, writer: dict[tuple[Key, str], Txn],
                          found: dict[str, list[tuple[Key, int]]]) -> None:
        """What the stage consumed (read_committed, during the run, in any of its transactions,
        committed or not) was committed data, at the offset it finally has."""
        consumed: dict[tuple[Key, int, str], list[str]] = defaultdict(list)
        for txn in self.txns.values():
            for source in txn.sources.values():
                consumed[source].append(txn.id)
        for (key, offset, value), by in sorted(consumed.items()):
            wrote = writer.get((key, value))
            if wrote is not None and wrote.outcome == ABORTED:
                report.aborted_read.append(Anomaly(wrote.id, (key,), f"aborted, yet the stage consumed {value!r} at "
                                                                     f"{name(key)}@{offset} (in {', '.join(by)})"))
            elif (key, offset) not in found.get(value, ()):
                finally_at = [f"{name(k)}@{o}" for k, o in found.get(value, ())] or "nowhere"
                report.unstable_read.append(Anomaly(
                    ", ".join(by), (key,), f"consumed {value!r} at {name(key)}@{offset} (read_committed, during the "
                                           f"run); the final read_committed log has it {finally_at}"))

    def _check_offsets(self, report: Report, found: dict[str, list[tuple[Key, int]]]) -> None:
        """Every input record below the group's committed offset has exactly one output read by
        read_committed; no input at or above it has any; every output names a real input."""
        if not self.input_keys:
            return
        outputs: dict[tuple[Key, int], list[tuple[str, str]]] = defaultdict(list)  # input -> [(output, txn)]
        origin: dict[str, str] = {}  # output -> the input value it names
        for txn in self.txns.values():
            for output, (source, offset, source_value) in txn.sources.items():
                if found.get(output):
                    outputs[(source, offset)].append((output, txn.id))
                    origin[output] = source_value
        for key in sorted(self.input_keys):
            committed_to = self.group_offsets.get(key, 0)
            inputs = dict(self.committed_log.get(key, []))
            for offset, value in sorted(inputs.items()):
                made = outputs.get((key, offset), [])
                if offset < committed_to and len(made) != 1:
                    report.offsets.append(Anomaly(
                        ",".join(sorted({t for _o, t in made})), (key,),
                        f"input {value!r} at {name(key)}@{offset} is below the committed offset {committed_to} "
                        f"but has {len(made)} outputs" + (f": {[o for o, _t in made]}" if made else "")))
            for (source, offset), made in sorted(outputs.items()):
                if source != key:
                    continue
                txns = ",".join(sorted({t for _o, t in made}))
                if offset >= committed_to:
                    report.offsets.append(Anomaly(
                        txns, (key,), f"output(s) {[o for o, _t in made]} of the input at {name(key)}@{offset}, "
                                      f"at or above the committed offset {committed_to}"))
                for output, _t in made:
                    if inputs.get(offset) != origin[output]:
                        report.offsets.append(Anomaly(
                            txns, (key,), f"output {output!r} names the input {origin[output]!r} at "
                                          f"{name(key)}@{offset}, where read_committed has {inputs.get(offset)!r}"))
