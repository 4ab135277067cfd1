"""Fixtures shared by unit and integration tests: a real ZooKeeper.

``zookeeper_server``: one throwaway ZooKeeper per test module (tests/zookeeper_server.py),
stopped by its PID when the module ends. Missing Java or Debian's zookeeper package is a
failure, not a skip (.ci/run installs both; a skipped test would hide a broken cluster mode).
``zk_connect``: "127.0.0.1:PORT/test-<uuid>", a fresh chroot per test, so tests sharing
the server never see each other's znodes.
Mark tests that use them ``@pytest.mark.zookeeper``.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from tests.zookeeper_server import ZooKeeperServer, unavailable_reason


@pytest.fixture(scope="module")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"ZooKeeper cannot run here: {reason} (apt-get install zookeeper)")
    server = ZooKeeperServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer) -> str:
    return f"{zookeeper_server.address}/test-{uuid.uuid4().hex}"
