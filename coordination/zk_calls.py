"""Calling ZooKeeper through kazoo: calls retried through connection losses, and multi-op
transactions with the op that failed them.

Why a module: the ZooKeeper backend (coordination/zookeeper.py), its topic registry
(coordination/zookeeper_topics.py) and the znode updater of the stores
(coordination/zk_update.py) all make their requests this way; one retry policy, one reading
of kazoo's transaction results.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, ParamSpec, TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import ConnectionClosedError, RolledBackError, RuntimeInconsistency
from kazoo.retry import KazooRetry, RetryFailedError

from coordination.errors import CoordinationUnavailable

T = TypeVar("T")
P = ParamSpec("P")


def default_retry(deadline: float = 30.0) -> KazooRetry:
    """Retry a call through connection losses (and session expiry) for ``deadline`` s."""
    return KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=deadline)


def retrying(retry: KazooRetry, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` under a private copy of ``retry`` (a KazooRetry keeps its
    attempt count in itself, so one shared by threads would mix their counts)."""
    try:
        return retry.copy()(fn, *args, **kwargs)
    except (RetryFailedError, ConnectionClosedError, InterruptedError) as exc:
        raise CoordinationUnavailable(f"ZooKeeper did not answer: {exc!r}") from exc


def transact(client: KazooClient, retry: KazooRetry, build: Callable[[TransactionRequest], None]) -> list[Any]:
    """Commit the transaction ``build(tx)`` fills in; returns kazoo's per-op results, where
    a failed op is an exception instance. A retried commit (after a lost connection) may
    find its own earlier success: callers read back before reporting a conflict."""

    def once() -> list[Any]:
        tx = client.transaction()
        build(tx)
        return list(tx.commit())

    return retrying(retry, once)


def failure(results: Iterable[object]) -> tuple[int, Exception] | None:
    """The op that made a transaction fail (the others report RolledBack/RuntimeInconsistency)."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return index, result
    return None
