"""The per-partition CPU cost of a wide Fetch in a worker, without sockets or other processes.

    python -m loadtest.micro.fetch_cost [--partitions 1000] [--version 12] [--rounds 200]

A consumer of the many-partitions workload sends a Fetch naming every partition about
130 times a second (librdkafka, 1,000 partitions), and most of them find nothing new. So
the work a worker does per *requested partition* counts, whether or not it has data.
This tool times, with timeit on one in-memory request (best of 5 repeats):

* ``decode``: broker/protocol/fetch_request.py's decode of the request body, which the
  connection does before the handler runs; ``kio_decode``: kio's decode of the same
  body, which it replaced (for comparison);
* ``resolve``: broker/apis/fetch.py ``resolve``, which turns the request into read
  items (a stand-in registry answers the topic lookup);
* ``watch``: the long-poll watch of a fetch below min_bytes: register under every
  partition, re-arm once after a wakeup, cancel (broker/partitions/purgatory.py);
* ``respond``: broker/apis/fetch.py ``respond`` of the owners' answers when no partition
  has new records (the usual wide Fetch): the per-partition answers and their encoding by
  broker/protocol/fast.py (versions below 16: v16 adds the leaders' endpoints, which
  need a cluster view).

It prints each in µs per request and per partition. Reads are left out: they depend on
the logs' state and are seen in the benchmark's profile (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from broker.apis import fetch
from broker.config import load_config
from broker.partitions.partition_ops import ReadResult
from broker.partitions.purgatory import FetchPurgatory
from broker.protocol import codec, fetch_request
from broker.protocol.build import build
from broker.security.broker_security import BrokerSecurity
from loadtest.micro import codec_cost
from loadtest.micro.codec_cost import best_seconds

TOPIC = "fetch-cost"


class _Topic:
    """What fetch.resolve reads of a coordination.topics.TopicInfo."""

    def __init__(self, partitions: int) -> None:
        self.name = TOPIC
        self.topic_id = uuid.uuid4()
        self.partitions = partitions


class _Registry:
    def __init__(self, info: _Topic) -> None:
        self._info = info

    def by_id(self, _topic_id: uuid.UUID) -> _Topic:
        return self._info

    def refresh(self) -> bool:
        return False


class _Node:
    def __init__(self, info: _Topic) -> None:
        self._info = info
        self.registry = _Registry(info)
        # No authorizer (the default): the checks resolve makes cost one attribute read.
        self.security = BrokerSecurity(load_config(None, {}))

    def topic(self, _name: str) -> _Topic:
        return self._info


class _Context:
    def __init__(self, node: _Node, version: int) -> None:
        self.node = node
        self.api_version = version


def kio_fetch_request(version: int, partitions: int, topic_id: uuid.UUID) -> Any:
    """A Fetch as librdkafka sends it: every partition, each at some offset (build() keeps
    the fields this version has)."""
    return build(codec.request_class(1, version), {
        "cluster_id": None, "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 50 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
        "topics": [{"topic": TOPIC, "topic_id": topic_id, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": 1000 + p, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(partitions)]}],
    })



async def _watch_cost(tps: list[Any], rounds: int) -> float:
    purgatory = FetchPurgatory()

    def cycle() -> None:
        watch = purgatory.watch(tps)
        watch.rearm()
        watch.cancel()

    return best_seconds(cycle, rounds)


def measure(partitions: int, version: int, rounds: int) -> dict[str, float]:
    """Seconds per request for each step."""
    info = _Topic(partitions)
    request = kio_fetch_request(version, partitions, info.topic_id)
    body = codec.encode_body(request)
    decoded = fetch_request.decode(version, body, 0)
    context = _Context(_Node(info), version)
    topics, wanted = fetch.resolve(context, decoded)
    items = [w[3] for w in wanted]
    assert len(items) == partitions, "every partition resolves to a read"
    # Caught up: the owners answer the marks and no bytes.
    results = [ReadResult(0, 1000 + p, 0, 1000 + p) for p in range(partitions)]
    figures = {
        "decode": best_seconds(lambda: fetch_request.decode(version, body, 0), rounds),
        "kio_decode": best_seconds(lambda: codec.decode_request(1, version, body, 0), rounds),
        "resolve": best_seconds(lambda: fetch.resolve(context, decoded), rounds),
        "watch": asyncio.run(_watch_cost([item[0] for item in items if item is not None], rounds)),
    }
    if version < 16:
        figures["respond"] = best_seconds(lambda: fetch.respond(context, 0, topics, wanted, results, 50 << 20), rounds)
    return figures


def main(argv: list[str] | None = None) -> int:
    return codec_cost.main(argv, __doc__ or "", measure, "Fetch", 1000, 12, 200)


if __name__ == "__main__":
    raise SystemExit(main())
