"""Changing one znode as Kafka does: read it, write it back conditionally, announce it, retry lost races.

Why a module: the ZooKeeper credential store (coordination/credentials.py, a user's
/config/users znode announced under /config/changes) and ACL store (coordination/acls/store.py,
a resource's /kafka-acl* znode announced under /kafka-acl*-changes) change their znodes the
same way and must get the same concurrency right; only what they read and write differs,
which they pass in as a ``plan``. The shared part:

* The znode is read with its version (or found missing). ``plan(data, exists, conflicts)``
  then says what to do: ``Done(result)``, nothing to write; or ``Write(payload, result)``.
* A write is one transaction: create the znode (it was missing), or set its data or delete it
  (``Write.delete``) conditionally on the version read; plus the persistent sequential
  change notification. So no change is left unannounced and a failed write announces nothing.
* A lost race (BadVersion, NodeExists, NoNode: another writer got in between) reads again and
  asks the plan again, with ``conflicts`` counting the lost races; when the plan finds what it
  wanted already there it can answer ``Done`` (our own commit whose answer was lost to a
  connection drop and retried by ``call``, or an identical concurrent write). A NoNode on the
  notification (or on a create) means a parent went away: the parents are made again.
  ``MAX_CONFLICTS`` lost races in a row is a livelock, not load: the store's error is raised,
  "<path>: <n> concurrent changes in a row; giving up".
* Every request goes through ``call`` (the backend's retrying ``_call``), the transaction as
  ``_commit``, so a wrapper can tell it apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Generic, Iterable, Protocol, TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from coordination.zk_calls import failure

T = TypeVar("T")
R = TypeVar("R")

# Lost races in a row on one znode before giving up (a livelock, not load).
MAX_CONFLICTS = 100


class CallWrapper(Protocol):
    """How a ZooKeeper store runs each request, e.g. ZooKeeperBackend._call (retries)."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        ...


def direct(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """The CallWrapper that just makes the request."""
    return fn(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class Done(Generic[R]):
    """Nothing (more) to write; ``update`` returns ``result``."""

    result: R


@dataclasses.dataclass(frozen=True)
class Write(Generic[R]):
    """Write ``payload`` (or, with ``delete``, delete the existing znode); once committed,
    ``update`` returns ``result``."""

    payload: bytes
    result: R
    delete: bool = False


# (the znode's data, whether it exists, lost races so far) -> what to do
Plan = Callable[[bytes | None, bool, int], "Done[R] | Write[R]"]


class ZnodeUpdater:
    """Conditional, announced changes of single znodes over a started KazooClient.

    ``parents``: the persistent znodes the changes need (made once, parents first, and again
    when one went away); ``conflict_error``: the exception raised after MAX_CONFLICTS lost
    races in a row."""

    def __init__(self, client: KazooClient, call: CallWrapper, parents: Iterable[str],
                 conflict_error: Callable[[str], Exception]) -> None:
        self._client = client
        self._call = call
        self._parents = tuple(parents)
        self._conflict_error = conflict_error
        self._parents_ready = False

    def ensure_parents(self) -> None:
        if self._parents_ready:
            return
        for path in self._parents:
            self._call(self._client.ensure_path, path)
        self._parents_ready = True

    def update(self, path: str, notify_path: str, notification: bytes, plan: Plan[R]) -> R:
        """Change ``path`` as ``plan`` says, with the notification ``notification`` created
        sequentially at ``notify_path``; returns the result of the plan's last answer."""
        self.ensure_parents()
        conflicts = 0
        while True:
            try:
                data, stat = self._call(self._client.get, path)
                exists, version = True, stat.version
            except NoNodeError:
                data, exists, version = None, False, None
            step = plan(data, exists, conflicts)
            if isinstance(step, Done):
                return step.result

            def build(tx: TransactionRequest, version: int | None = version, step: Write[R] = step) -> None:
                if version is None:
                    tx.create(path, step.payload)
                elif step.delete:
                    tx.delete(path, version=version)
                else:
                    tx.set_data(path, step.payload, version=version)
                tx.create(notify_path, notification, sequence=True)

            failed = failure(self._call(self._commit, build))
            if failed is None:
                return step.result
            index, error = failed
            if isinstance(error, NoNodeError) and (version is None or index == 1):
                self._parents_ready = False  # a parent or the change root went away
                self.ensure_parents()
            elif not isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
                raise error
            conflicts += 1
            if conflicts >= MAX_CONFLICTS:
                raise self._conflict_error(f"{path}: {conflicts} concurrent changes in a row; giving up")

    def _commit(self, build: Callable[[TransactionRequest], None]) -> list[Any]:
        tx = self._client.transaction()
        build(tx)
        return list(tx.commit())
