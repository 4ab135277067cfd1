"""A confluent-kafka share consumer (tests/integration/confluent_share_consumer.py) as its own
process, so a test can kill -9 it while it holds records.

    python -m tests.integration.share_consumer_process BOOTSTRAP GROUP TOPIC NAME [WORK_S]

It prints the JSON lines of share_consumer_lines.py on stdout, each flushed at once (a killed
consumer's output is complete up to its death, but for a last line cut short) and stamped
with ``"at"``: time.monotonic() when printed, a clock every process of the machine shares, so
a test orders a consumer's deliveries against its own observations. A record's line is
printed before its acknowledgement is sent, WORK_S seconds (default 0) before. SIGTERM
closes the consumer (it leaves the group).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

from tests.integration.confluent_share_consumer import ConfluentShareConsumer


class PrintingShareConsumer(ConfluentShareConsumer):
    _print_lock = threading.Lock()

    def _line(self, event: dict[str, Any]) -> None:
        line = json.dumps({**event, "at": time.monotonic()})
        with self._print_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def main(argv: list[str]) -> int:
    bootstrap, group, topic, name = argv[:4]
    work_s = float(argv[4]) if len(argv) > 4 else 0.0
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: stopping.set())
    member = PrintingShareConsumer(bootstrap, group, [topic], name, work_s=work_s)
    while not stopping.is_set() and member.running():
        stopping.wait(0.2)
    member.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
