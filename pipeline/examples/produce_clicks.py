"""Produce JSON click events to a topic, for the other examples to read.

    python -m pipeline.examples.produce_clicks --bootstrap 127.0.0.1:9092 --topic clicks --count 10000

Each event is ``{"user": "user-7", "page": "/pricing", "ts": 1700000012345}``, keyed by its
user; ``ts`` (milliseconds since the epoch) is the event time. A few users click much more
than the others. With ``--rate 0`` (the default) events go out as fast as possible, their
event times spread evenly over the ``--minutes`` before now (or from ``--start-ms``); with
``--rate N``, N events a second, each stamped with the time it is sent. Either way about
one event in ten is late: its ts is up to 5 s earlier, so event time is slightly out of
order, as it is when clicks come from many browsers. The topic is created if missing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Iterator

from pipeline.examples import ensure_topic

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup", "/login", "/search", "/cart")
LATE_SHARE = 0.1
MAX_LATENESS_MS = 5_000
FLUSH_TIMEOUT = 60.0


def clicks(count: int, users: int, seed: int | None) -> Iterator[tuple[str, str, int]]:
    """``count`` clicks as (user, page, lateness in ms): about one in ten is late."""
    rng = random.Random(seed)
    names = [f"user-{n}" for n in range(users)]
    weights = [1.0 / (n + 1) for n in range(users)]  # user-0 clicks most
    for _ in range(count):
        lateness = rng.randint(1, MAX_LATENESS_MS) if rng.random() < LATE_SHARE else 0
        yield rng.choices(names, weights)[0], rng.choice(PAGES), lateness


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline.examples.produce_clicks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap servers (default %(default)s)")
    parser.add_argument("--topic", default="clicks", help="topic to produce to (default %(default)s)")
    parser.add_argument("--count", type=int, default=10_000, help="events to produce (default %(default)s)")
    parser.add_argument("--users", type=int, default=50, help="distinct users (default %(default)s)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="events per second, event time = send time; 0: as fast as possible (default)")
    parser.add_argument("--minutes", type=float, default=5.0,
                        help="with --rate 0: event times spread over this many minutes (default %(default)s)")
    parser.add_argument("--start-ms", type=int, default=None,
                        help="with --rate 0: event time of the first event (default: --minutes before now)")
    parser.add_argument("--partitions", type=int, default=3,
                        help="partitions if the topic is created (default %(default)s)")
    parser.add_argument("--seed", type=int, default=None, help="random seed, for a repeatable run")
    args = parser.parse_args(argv)
    if args.count < 0 or args.users < 1 or args.rate < 0 or args.minutes < 0 or args.partitions < 1:
        parser.error("--count, --rate and --minutes must be >= 0; --users and --partitions >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import Producer

    args = parse_args(argv)
    if ensure_topic(args.bootstrap, args.topic, args.partitions):
        print(f"created topic {args.topic} ({args.partitions} partitions)")
    span_ms = int(args.minutes * 60_000)
    start_ms = args.start_ms if args.start_ms is not None else int(time.time() * 1000) - span_ms
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    began = time.monotonic()
    first = last = 0
    for index, (user, page, lateness) in enumerate(clicks(args.count, args.users, args.seed)):
        if args.rate > 0:
            # Live: wait for this event's turn, then stamp it with the wall clock.
            time.sleep(max(0.0, began + index / args.rate - time.monotonic()))
            ts = int(time.time() * 1000)
        else:
            ts = start_ms + index * span_ms // max(args.count, 1)
        ts -= lateness
        first, last = (min(first, ts), max(last, ts)) if index else (ts, ts)
        event = json.dumps({"user": user, "page": page, "ts": ts})
        while True:
            try:
                producer.produce(args.topic, key=user, value=event, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain it
        producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT)
    if failures or remaining:
        print(f"{len(failures)} events failed, {remaining} not acknowledged; first error: "
              f"{failures[0] if failures else 'timeout'}", file=sys.stderr)
        return 1
    print(f"produced {args.count} click events to {args.topic} (event time {first} .. {last})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
