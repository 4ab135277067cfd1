"""Helpers shared by the store tests (test_credentials.py, test_acl_store.py).

Both stores are tested the same way: znodes read back as JSON, watch callbacks counted through
a queue with bounded waits, concurrent writers run in threads that must all end. The
``make_client`` fixture they use is in conftest.py (a fixture imported from here would be an
unused import to ruff).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable, TypeVar

import orjson
from kazoo.client import KazooClient

WAIT = 10.0

MakeClient = Callable[[], KazooClient]
A = TypeVar("A")


def znode_json(client: KazooClient, path: str) -> Any:
    data, _ = client.get(path)
    return orjson.loads(data)


def next_call(calls: queue.Queue[str], timeout: float = WAIT) -> str:
    try:
        return calls.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"the watch did not fire within {timeout} s") from None


def queued(calls: queue.Queue[str]) -> int:
    """How many calls are waiting (and takes them all)."""
    count = 0
    while True:
        try:
            calls.get_nowait()
        except queue.Empty:
            return count
        count += 1


def run_in_threads(run: Callable[[A], None], args: Iterable[A], timeout: float = WAIT * 3) -> list[BaseException]:
    """``run(arg)`` in a thread of its own for each of ``args``, all at once; asserts that
    every thread ends within ``timeout`` and returns what they raised."""
    errors: list[BaseException] = []

    def guarded(arg: A) -> None:
        try:
            run(arg)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(arg,)) for arg in args]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        assert not thread.is_alive()
    return errors
