"""What a group consumer printed, read back: the lines of tests/java/castle/GroupConsumer.java,
tests/go/groupconsumer and tests/integration/confluent_group_consumer.py, which all print

    ASSIGNED t:0 t:1        partitions added to the member (a delta)
    REVOKED t:1             partitions taken away after the member gave them up
    LOST t:0                partitions taken away without that (the member was fenced)
    RECORD t 0 5 key value  one record: topic, partition, offset, key, value
    COMMITTED t:0=6         the next offsets a commit stored
    DONE 12                 the client closed (left the group) after that many records
"""

from __future__ import annotations

from typing import NamedTuple


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: str
    value: str


def _lines(stdout: str, first_word: str) -> list[list[str]]:
    return [line.split()[1:] for line in stdout.splitlines() if line.split()[:1] == [first_word]]


def owned(stdout: str) -> set[str]:
    """The partitions (``topic:partition``) the member holds after every change it printed."""
    held: set[str] = set()
    for line in stdout.splitlines():
        words = line.split()
        if words[:1] == ["ASSIGNED"]:
            held |= set(words[1:])
        elif words[:1] in (["REVOKED"], ["LOST"]):
            held -= set(words[1:])
    return held


def records(stdout: str) -> list[Record]:
    return [Record(w[0], int(w[1]), int(w[2]), w[3], w[4]) for w in _lines(stdout, "RECORD") if len(w) == 5]


def ever_assigned(stdout: str) -> set[str]:
    return {partition for words in _lines(stdout, "ASSIGNED") for partition in words}


def done(stdout: str) -> int | None:
    """The record count of the DONE line, None before the client closed."""
    found = _lines(stdout, "DONE")
    return int(found[-1][0]) if found else None
