"""Fixtures of the coordination unit tests.

``make_client``: started kazoo clients inside the test's fresh ZooKeeper chroot
(``zk_connect``, tests/conftest.py), each its own session, all closed when the test ends.
Used by the store tests (test_credentials.py, test_acl_store.py); their plain helpers are in
store_helpers.py.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from kazoo.client import KazooClient

from coordination.zookeeper import split_connect
from tests.unit.coordination.store_helpers import WAIT, MakeClient


@pytest.fixture
def make_client(zk_connect: str) -> Iterator[MakeClient]:
    """Started kazoo clients inside the test's chroot, each its own session."""
    hosts, chroot = split_connect(zk_connect)
    bare = KazooClient(hosts=hosts)
    bare.start(WAIT)
    try:
        bare.ensure_path(chroot)
    finally:
        bare.stop()
        bare.close()
    made: list[KazooClient] = []

    def make() -> KazooClient:
        client = KazooClient(hosts=zk_connect)
        made.append(client)
        client.start(WAIT)
        return client

    yield make
    for client in made:
        try:
            client.stop()
            client.close()
        except Exception:
            pass
