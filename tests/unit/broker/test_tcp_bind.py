"""The supervisor's exclusive binds: the shared-port reservation it holds while the OS
picks the workers' own ports (CI once saw a worker's OS-picked port equal the shared
port, which then no worker could listen on)."""

from __future__ import annotations

import socket

import pytest

from broker.network.tcp_bind import bind_exclusive
from broker.process.supervisor import reserve_shared_port


def test_a_reserved_shared_port_is_never_picked_for_another_socket() -> None:
    probe = bind_exclusive("127.0.0.1", 0)
    port = probe.getsockname()[1]
    probe.close()
    held = reserve_shared_port("127.0.0.1", port)
    assert held is not None
    try:
        assert held.getsockname()[1] == port
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind_exclusive("127.0.0.1", port).close()
        picked = [bind_exclusive("127.0.0.1", 0) for _ in range(200)]
        try:
            assert port not in {sock.getsockname()[1] for sock in picked}
        finally:
            for sock in picked:
                sock.close()
    finally:
        held.close()
    # released: the workers can now bind it with SO_REUSEPORT
    worker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    worker.bind(("127.0.0.1", port))
    worker.close()


def test_a_port_someone_listens_on_is_refused() -> None:
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    try:
        with pytest.raises(RuntimeError, match="another broker running there"):
            reserve_shared_port("127.0.0.1", other.getsockname()[1])
    finally:
        other.close()


def test_port_zero_reserves_nothing() -> None:
    assert reserve_shared_port("127.0.0.1", 0) is None
