"""Opening a coordination backend: ZooKeeper when ``zookeeper.connect`` is set, else the
local one (the interface is coordination/backend.py).

Why a module: the implementations import the interface, while choosing between them means
importing them (kazoo only when ZooKeeper is used); and every process of a broker opens its
own backend the same way, from the same settings.
"""

from __future__ import annotations

from typing import Protocol

from coordination.backend import CoordinationBackend, SessionCredentials


class BrokerSettings(Protocol):
    """What open_broker_backend reads of a broker config (broker.config.BrokerConfig)."""

    def get_int(self, name: str) -> int: ...

    def get_str(self, name: str) -> str: ...

    @property
    def node_id(self) -> int: ...

    @property
    def log_dirs(self) -> list[str]: ...


def open_backend(zookeeper_connect: str, data_dir: str, node_id: int, session_timeout: float | None = None,
                 resume: SessionCredentials | None = None) -> CoordinationBackend:
    """``ZooKeeperBackend`` when ``zookeeper_connect`` ("host:port[,host:port][/chroot]")
    is non-empty, else ``LocalBackend`` over ``data_dir`` (the first log dir). Not started.
    ``resume``: a session to take over (ZooKeeper only; the local backend has none)."""
    if zookeeper_connect.strip():
        # Imported here so a single-machine broker never loads kazoo.
        from coordination.zookeeper import DEFAULT_SESSION_TIMEOUT, ZooKeeperBackend

        return ZooKeeperBackend(zookeeper_connect.strip(), node_id,
                                session_timeout=session_timeout or DEFAULT_SESSION_TIMEOUT, resume=resume)
    from coordination.local import LocalBackend

    return LocalBackend(data_dir, node_id)


def open_broker_backend(config: BrokerSettings, resume: SessionCredentials | None = None) -> CoordinationBackend:
    """The started backend a broker's config names: its own session, for one process."""
    backend = open_backend(config.get_str("zookeeper.connect"), config.log_dirs[0], config.node_id,
                           config.get_int("zookeeper.session.timeout.ms") / 1000, resume)
    backend.start(config.get_int("zookeeper.connection.timeout.ms") / 1000)
    return backend
