"""ClusterSnapshot, a worker's in-memory view, over both backends of the one interface.

Each test opens two backends on the same store, as two processes of a broker would: a
"coordinator" that registers, campaigns and writes topics, and a worker's snapshot that
must learn all of it from the watches, its loop-side reads never waiting on the store.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import pytest

from coordination.backend import CoordinationBackend
from coordination.open_backend import open_backend
from coordination.snapshot import ClusterSnapshot

WAIT = 10.0
ADVERTISED = {"PLAINTEXT": ("127.0.0.1", 9092)}


def wait_until(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(params=["local", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def connect(request: pytest.FixtureRequest) -> str:
    if request.param == "local":
        return ""
    return str(request.getfixturevalue("zk_connect"))


@pytest.fixture
def backends(connect: str, tmp_path) -> Iterator[Callable[[], CoordinationBackend]]:
    made: list[CoordinationBackend] = []

    def make() -> CoordinationBackend:
        backend = open_backend(connect, str(tmp_path), 1, session_timeout=4.0)
        backend.start(WAIT)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.mark.timeout(60)
def test_a_snapshot_learns_topics_brokers_and_epochs_from_the_watches(backends) -> None:
    coordinator = backends()
    coordinator.register_broker(1, ADVERTISED)
    snapshot = ClusterSnapshot(backends(), ADVERTISED)
    changes = threading.Event()
    snapshot.on_change = changes.set
    try:
        assert snapshot.live_brokers() == {1: ADVERTISED}
        assert snapshot.holder_of("orders", 0) == -1  # not a topic: no holder, a retriable answer

        coordinator.topics().create("orders", 2, {}, brokers=[1])
        wait_until(changes.is_set, "the reader thread to load the new topic")
        assert snapshot.registry.refresh() is True  # the loop's compare sees the new version once
        assert snapshot.registry.refresh() is False
        assert snapshot.registry.get("orders") is not None
        assert [snapshot.holder_of("orders", p) for p in (0, 1, 2)] == [1, 1, -1]

        coordinator.topics().set_partitions("orders", 3)
        wait_until(lambda: snapshot.holder_of("orders", 2) == 1, "the grown partition's holder")

        epoch = coordinator.campaign(1, timeout=WAIT)
        wait_until(lambda: snapshot.current_epoch() == epoch, f"epoch {epoch}")
        coordinator.resign()
        again = coordinator.campaign(1, timeout=WAIT)
        assert again == epoch + 1
        wait_until(lambda: snapshot.current_epoch() == again, f"epoch {again}")
    finally:
        snapshot.close()


@pytest.mark.timeout(60)
def test_an_admin_write_through_the_snapshot_is_loaded_before_it_answers(backends) -> None:
    snapshot = ClusterSnapshot(backends(), ADVERTISED)
    try:
        # This broker counts itself alive before its coordinator process registers it.
        assert snapshot.live_brokers() == {1: ADVERTISED}
        snapshot.registry.create("payments", 1, {}, brokers=sorted(snapshot.live_brokers()))
        snapshot.refresh_now()  # what the admin thread does after its write (the reader may be first)
        assert snapshot.holder_of("payments", 0) == 1
        assert snapshot.registry.refresh() is True
        snapshot.registry.delete("payments")
        snapshot.refresh_now()
        assert snapshot.registry.get("payments") is None
        assert snapshot.holder_of("payments", 0) == -1
    finally:
        snapshot.close()
