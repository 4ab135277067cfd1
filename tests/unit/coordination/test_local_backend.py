"""LocalBackend: the flock election across real processes, the epoch files, the rest.

Children are real Python processes that campaign and report on stdout; each is stopped
by its own PID in a finalizer, and every read of a child's output is bounded.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import orjson
import pytest
from kio.schema.errors import ErrorCode

from coordination.backend import CoordinationUnavailable, NotCoordinator
from coordination.local import LocalBackend
from coordination.open_backend import open_backend
from coordination.topics import TopicRegistryError
from coordination.znodes import new_cluster_id

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[3]
WAIT = 10.0

# Campaigns, prints the epoch it won, then holds the lock until stdin closes.
CHILD = """
import sys
from coordination.local import LocalBackend
backend = LocalBackend(sys.argv[1], int(sys.argv[2]))
backend.start()
print("campaigning", flush=True)
print("epoch", backend.campaign(int(sys.argv[2])), flush=True)
sys.stdin.readline()
backend.close()
"""


class Child:
    def __init__(self, data_dir: Path, node_id: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), str(node_id)], cwd=REPO_ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._buffer = b""

    def line(self, timeout: float) -> str | None:
        """The next line of output, or None if none arrives within ``timeout`` s."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def release(self) -> None:
        """Close stdin: the child closes the backend and exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(WAIT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Callable[[int], Child]]:
    started: list[Child] = []

    def start(node_id: int) -> Child:
        child = Child(tmp_path, node_id)
        started.append(child)
        return child

    yield start
    for child in started:
        child.stop()


@pytest.fixture
def make_backend(tmp_path: Path) -> Iterator[Callable[[], LocalBackend]]:
    made: list[LocalBackend] = []

    def make() -> LocalBackend:
        backend = LocalBackend(str(tmp_path), 1)
        backend.start()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def test_factory_picks_local_without_zookeeper(tmp_path: Path) -> None:
    assert isinstance(open_backend("", str(tmp_path), 1), LocalBackend)
    assert isinstance(open_backend("  ", str(tmp_path), 1), LocalBackend)


def test_only_one_process_holds_the_lock_and_the_next_takes_over(tmp_path: Path,
                                                                 children: Callable[[int], Child],
                                                                 make_backend: Callable[[], LocalBackend]) -> None:
    observer = make_backend()
    first = children(1)
    assert first.line(WAIT) == "campaigning"
    assert first.line(WAIT) == "epoch 1"
    second = children(1)
    assert second.line(WAIT) == "campaigning"
    assert second.line(0.5) is None, "the second process must wait while the first holds the lock"
    assert observer.coordinator() == (1, 1)
    assert orjson.loads((tmp_path / "coordinator.json").read_bytes())["brokerid"] == 1

    first.release()  # a clean exit
    assert second.line(WAIT) == "epoch 2"
    assert (tmp_path / "coordinator_epoch").read_text() == "2"

    # A killed coordinator loses the lock too (the kernel drops it with the process).
    os.kill(second.proc.pid, signal.SIGKILL)
    second.proc.wait(WAIT)
    assert observer.campaign(1, timeout=WAIT) == 3
    assert observer.coordinator() == (1, 3)
    third = children(1)
    assert third.line(WAIT) == "campaigning"
    assert third.line(0.3) is None
    observer.resign()
    assert third.line(WAIT) == "epoch 4"


def test_campaign_timeout_close_and_resign_in_one_process(make_backend: Callable[[], LocalBackend]) -> None:
    holder, other = make_backend(), make_backend()
    assert holder.coordinator() is None and holder.current_epoch() == 0
    assert holder.campaign(1) == 1
    assert holder.campaign(1) == 1  # already the coordinator
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        other.campaign(1, timeout=0.3)
    assert time.monotonic() - started < 2.0
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(other.campaign, 1)
        time.sleep(0.2)
        other.close()
        with pytest.raises(CoordinationUnavailable):
            waiting.result(WAIT)
    # The abandoned attempts must not keep the lock once the holder lets go (their
    # threads, still blocked in flock, may take it for an instant before dropping it).
    holder.resign()
    deadline = time.monotonic() + WAIT
    while holder.coordinator() is not None:
        assert time.monotonic() < deadline, "an abandoned campaign kept the lock"
        time.sleep(0.01)
    late = make_backend()
    assert late.campaign(1, timeout=WAIT) == 2


def test_watch_coordinator_fires_when_the_coordinator_changes(make_backend: Callable[[], LocalBackend],
                                                             children: Callable[[int], Child]) -> None:
    watcher = make_backend()
    events: queue.Queue = queue.Queue()
    watcher.watch_coordinator(lambda: events.put("changed"))
    assert events.get(timeout=WAIT) == "changed"  # once at registration
    child = children(1)
    assert child.line(WAIT) == "campaigning" and child.line(WAIT) == "epoch 1"
    assert events.get(timeout=WAIT) == "changed"
    child.release()
    assert events.get(timeout=WAIT) == "changed"
    assert watcher.coordinator() is None


def test_cluster_id_brokers_and_state(make_backend: Callable[[], LocalBackend], tmp_path: Path) -> None:
    first, second = make_backend(), make_backend()
    proposed = new_cluster_id()
    assert first.cluster_id(proposed) == proposed
    assert second.cluster_id(new_cluster_id()) == proposed
    assert orjson.loads((tmp_path / "cluster-id.json").read_bytes()) == {"version": "1", "id": proposed}

    states: list[str] = []
    first.add_state_listener(states.append)
    assert states == ["CONNECTED"]
    calls: list[str] = []
    first.watch_brokers(lambda: calls.append("changed"))
    assert first.live_brokers() == {}
    first.register_broker(1, {"PLAINTEXT": ("127.0.0.1", 9092)})
    assert first.live_brokers() == {1: {"PLAINTEXT": ("127.0.0.1", 9092)}}
    assert calls == ["changed", "changed"]
    first.reregister()


def test_group_mirror_files_are_for_the_coordinator_only(make_backend: Callable[[], LocalBackend],
                                                        tmp_path: Path) -> None:
    backend = make_backend()
    with pytest.raises(NotCoordinator):
        backend.write_group_members("g", {})
    backend.campaign(1)
    backend.write_group_members("g/1", {"m1": b'{"client_id":"c"}', "m2": b"not json"})
    backend.write_group_owners("g/1", {("t", 0): "m1", ("t", 1): "m2"})
    doc = orjson.loads((tmp_path / "groups" / "g%2F1.json").read_bytes())
    assert doc == {"version": 1, "group": "g/1", "members": {"m1": {"client_id": "c"}, "m2": "not json"},
                   "owners": {"t": {"0": "m1", "1": "m2"}}}
    backend.write_group_members("g/1", {"m2": b"{}"})
    doc = orjson.loads((tmp_path / "groups" / "g%2F1.json").read_bytes())
    assert doc["members"] == {"m2": {}} and doc["owners"] == {"t": {"0": "m1", "1": "m2"}}
    backend.delete_group("g/1")
    assert not (tmp_path / "groups" / "g%2F1.json").exists()


def test_topics_are_the_local_registry_with_replicas_on_this_node(make_backend: Callable[[], LocalBackend]) -> None:
    backend = make_backend()
    registry = backend.topics()
    info = registry.create("t", 3, {"retention.ms": "5"})
    assert registry.get("t") == info
    assert registry.replicas("t") == {0: [1], 1: [1], 2: [1]}
    with pytest.raises(TopicRegistryError) as refused:
        registry.replicas("missing")
    assert refused.value.code == ErrorCode.unknown_topic_or_partition
