"""``python -m storage.dump PATH``: print the batches of a segment (or every segment of a
partition dir) and verify each CRC-32C, like Kafka's kafka-dump-log. Transaction markers
show their type (COMMIT/ABORT) and coordinator epoch, and a batch a cleaner stamped its
delete horizon (KIP-534); ``.txnindex`` files (given, or
beside the segments of a dir) show their aborted-transaction entries. Offline tool: it
opens files read-only and never changes them.
"""

from __future__ import annotations

import argparse
import os
import sys
from mmap import ACCESS_READ, mmap
from typing import Iterator, TextIO

import orjson

from storage import files
from storage.batch import check_batch_frame
from storage.errors import CorruptRecordError
from storage.records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, decode_batch, read_control_record
from storage.txn_index import ENTRY_SIZE, decode_entries

MARKER_NAMES = {CONTROL_TYPE_ABORT: "ABORT", CONTROL_TYPE_COMMIT: "COMMIT"}


def segment_paths(path: str) -> list[str]:
    """The segment files and transaction indexes of a dir, by base offset (each .log
    before its .txnindex), or ``path`` itself."""
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path)) if files.is_segment_log(n) or _is_txn_index(n)]
    return [path]


def _is_txn_index(name: str) -> bool:
    prefix, _, suffix = name.partition(".")
    return "." + suffix == files.TXN_INDEX_SUFFIX and len(prefix) == 20 and prefix.isdigit()


def dump_txn_index(path: str) -> Iterator[dict]:
    """One dict per AbortedTxn entry (Kafka's fields); a torn tail is an error."""
    with open(path, "rb") as handle:
        data = handle.read()
    for position, txn in enumerate(decode_entries(data)):
        yield {"position": position * ENTRY_SIZE, "version": 0, "producer_id": txn.producer_id,
               "first_offset": txn.first_offset, "last_offset": txn.last_offset,
               "last_stable_offset": txn.last_stable_offset}
    if len(data) % ENTRY_SIZE:
        yield {"position": len(data) - len(data) % ENTRY_SIZE,
               "error": f"{len(data) % ENTRY_SIZE} bytes after the last whole {ENTRY_SIZE}-byte entry"}


def dump_segment(path: str, *, records: bool = False) -> Iterator[dict]:
    """One dict per batch (and, with ``records``, its records); the last may be an error."""
    size = os.path.getsize(path)
    if size == 0:
        return
    with open(path, "rb") as handle, mmap(handle.fileno(), size, access=ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            position = 0
            while position < size:
                try:
                    header = check_batch_frame(view, position, size)
                except CorruptRecordError as exc:
                    if not any(view[position:size]):
                        yield {"position": position, "zeros": size - position}
                    else:
                        yield {"position": position, "error": str(exc)}
                    return
                entry: dict[str, object] = {
                    "position": position, "base_offset": header.base_offset, "last_offset": header.last_offset,
                    "count": header.record_count, "size": header.size, "crc": header.crc, "crc_valid": True,
                    "compression": header.compression, "timestamp_type": header.timestamp_type,
                    "max_timestamp": header.max_timestamp, "producer_id": header.producer_id,
                    "producer_epoch": header.producer_epoch, "base_sequence": header.base_sequence,
                    "partition_leader_epoch": header.partition_leader_epoch,
                    "transactional": header.is_transactional, "control": header.is_control,
                }
                if header.has_delete_horizon:
                    entry["delete_horizon_ms"] = header.base_timestamp  # a cleaner may drop it from then on
                if header.is_control and header.record_count == 0:
                    entry["marker"] = "emptied by a cleaner"  # kept for its producer's epoch alone
                elif header.is_control:
                    try:
                        marker = read_control_record(view[position : position + header.size])
                        entry["marker"] = MARKER_NAMES.get(marker.type, f"type {marker.type}")
                        entry["coordinator_epoch"] = marker.coordinator_epoch
                    except CorruptRecordError as exc:
                        entry["marker"] = f"unreadable: {exc}"
                if records:
                    _h, decoded = decode_batch(view[position : position + header.size])
                    entry["records"] = [
                        {"offset": r.offset, "timestamp": r.timestamp,
                         "key": None if r.key is None else r.key.decode("utf-8", "replace"),
                         "value": None if r.value is None else r.value.decode("utf-8", "replace"),
                         "headers": [[k, None if v is None else v.decode("utf-8", "replace")] for k, v in r.headers]}
                        for r in decoded
                    ]
                yield entry
                position += header.size
        finally:
            view.release()


def print_dump(paths: list[str], *, records: bool, as_json: bool, out: TextIO) -> int:
    """Print every batch; return 1 if any segment holds an invalid batch, else 0."""
    status = 0
    for path in paths:
        if not as_json:
            print(f"Dumping {path}", file=out)
        entries = dump_txn_index(path) if path.endswith(files.TXN_INDEX_SUFFIX) else dump_segment(path, records=records)
        for entry in entries:
            if "error" in entry:
                status = 1
            if as_json:
                out.write(orjson.dumps({"file": path, **entry}).decode() + "\n")
            elif "error" in entry:
                print(f"position: {entry['position']} INVALID: {entry['error']}", file=out)
            elif "zeros" in entry:
                print(f"position: {entry['position']} {entry['zeros']} zero bytes (preallocated, unused)", file=out)
            else:
                print(" ".join(f"{k}: {v}" for k, v in entry.items() if k != "records"), file=out)
                for record in entry.get("records", []):
                    print("| " + " ".join(f"{k}: {v}" for k, v in record.items()), file=out)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="castle log dump", description=__doc__)
    parser.add_argument("path", help="a .log segment file, a .txnindex file or a <topic>-<partition> directory")
    parser.add_argument("--records", action="store_true", help="decode and print every record")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    return print_dump(segment_paths(args.path), records=args.records, as_json=args.json, out=sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
