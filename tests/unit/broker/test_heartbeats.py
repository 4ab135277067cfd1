"""The children's heartbeats (broker/process/heartbeats.py): a slot beaten in a forked child
is read by the parent; a reset slot reads as never beaten; the coordinator has a slot of
its own past the workers'."""

from __future__ import annotations

import os
import time

from broker.process.heartbeats import NEVER, Heartbeats


def test_a_forked_child_beats_into_its_own_slot() -> None:
    beats = Heartbeats(2)
    worker_1, coordinator = beats.slot(1), beats.slot(-1)
    assert worker_1.last() == NEVER and coordinator.last() == NEVER
    before = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: beat once and leave without running the parent's cleanup
        worker_1.beat()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert before <= worker_1.last() <= time.monotonic()
    assert beats.slot(0).last() == NEVER and coordinator.last() == NEVER  # the others are untouched
    coordinator.beat()
    assert coordinator.last() >= worker_1.last()
    worker_1.reset()
    assert worker_1.last() == NEVER and coordinator.last() != NEVER
