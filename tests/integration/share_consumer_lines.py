"""What a share consumer printed, read back, and the checks a share group's delivery must pass.

tests/java/castle/ShareGroupConsumer.java and tests/integration/confluent_share_consumer.py
print one JSON object a line:

    {"event": "record", "topic": "t", "partition": 0, "offset": 5, "key": "k", "value": "v",
     "delivery_count": 1, "ack": "ACCEPT"}          a record delivered, and what the consumer answered
                                                     (ACCEPT, RELEASE, REJECT; HELD: never answered)
    {"event": "acknowledged", "topic": "t", "partition": 0, "offsets": [5, 6], "error": null}
                                                     the broker's answer to acknowledgements sent
    {"event": "error", "error": "..."}               a poll or commit that threw
    {"event": "done", "records": 12}                 the consumer closed (left the group)

An acknowledgement counts only once the broker confirmed it (an ``acknowledged`` line without
error naming the offset, after the record's line): a record printed but never confirmed was
not acknowledged, whatever the consumer meant.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Protocol


class ShareMember(Protocol):
    """A Java share consumer process or a confluent-kafka one on a thread, alike to a test."""

    name: str

    def stdout(self) -> str: ...

    def report(self, tail: int = 6000) -> str: ...


@dataclass(frozen=True)
class Delivery:
    member: str
    topic: str
    partition: int
    offset: int
    value: str
    delivery_count: int
    ack: str
    confirmed: bool  # the broker answered the acknowledgement without error

    @property
    def place(self) -> tuple[str, int, int]:
        return self.topic, self.partition, self.offset


def events(stdout: str) -> list[dict[str, Any]]:
    found = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def deliveries(member: ShareMember) -> list[Delivery]:
    """Every record the member printed, in order, with whether its acknowledgement was confirmed."""
    printed: list[dict[str, Any]] = []
    pending: dict[tuple[str, int, int], int] = {}  # place -> index in printed, awaiting the broker's answer
    confirmed: set[int] = set()
    for event in events(member.stdout()):
        if event["event"] == "record":
            pending[(event["topic"], event["partition"], event["offset"])] = len(printed)
            printed.append(event)
        elif event["event"] == "acknowledged" and event["error"] is None:
            for offset in event["offsets"]:
                index = pending.pop((event["topic"], event["partition"], offset), None)
                if index is not None:
                    confirmed.add(index)
    return [Delivery(member.name, e["topic"], e["partition"], e["offset"], e["value"], e["delivery_count"] or 0,
                     e["ack"], i in confirmed) for i, e in enumerate(printed)]


def all_deliveries(members: Iterable[ShareMember]) -> list[Delivery]:
    return [d for member in members for d in deliveries(member)]


def accepted(members: Iterable[ShareMember]) -> list[Delivery]:
    return [d for d in all_deliveries(members) if d.ack == "ACCEPT" and d.confirmed]


def done(member: ShareMember) -> int | None:
    """The record count of the done line, None before the consumer closed."""
    found = [e for e in events(member.stdout()) if e["event"] == "done"]
    return int(found[-1]["records"]) if found else None


def errors(member: ShareMember) -> list[str]:
    return [str(e["error"]) for e in events(member.stdout()) if e["event"] == "error"] + [
        f"{e['topic']}:{e['partition']} {e['offsets']}: {e['error']}" for e in events(member.stdout())
        if e["event"] == "acknowledged" and e["error"] is not None]


def reports(members: Iterable[ShareMember]) -> str:
    return "\n".join(f"== {m.name}\n{m.report()}" for m in members)


def assert_accepted_once(members: list[ShareMember], topic: str, values: set[str]) -> list[Delivery]:
    """Every value of ``topic`` accepted (and confirmed) exactly once over all the members, at one
    place each, and nothing else of the topic accepted; the accepted deliveries."""
    taken = [d for d in accepted(members) if d.topic == topic]
    twice = [v for v, n in Counter(d.value for d in taken).items() if n > 1]
    assert not twice, f"accepted more than once: {sorted(twice)[:10]}\n{reports(members)}"
    places = [p for p, n in Counter(d.place for d in taken).items() if n > 1]
    assert not places, f"one offset accepted more than once: {places[:10]}"
    got = {d.value for d in taken}
    assert got == values, (f"{len(values - got)} never accepted (e.g. {sorted(values - got)[:10]}), "
                           f"unexpected {sorted(got - values)[:10]}\n{reports(members)}")
    return taken
