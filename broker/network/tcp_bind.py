"""Exclusive TCP binds for the sockets the supervisor holds: the metrics port, and the
shared client port while the metrics port is bound (broker/process/supervisor.py
reserve_shared_port), so that a metrics port the OS picks is never the client port.

SO_REUSEADDR lets a restart bind over TIME_WAIT leftovers; no SO_REUSEPORT, so a port
another process listens on is refused instead of shared (the shared client port itself
is bound by each worker with SO_REUSEPORT: broker/process/worker.py).
"""

from __future__ import annotations

import socket


def bind_exclusive(host: str, port: int, purpose: str = "") -> socket.socket:
    """A TCP socket bound to (host, port), not yet listening. Raises OSError whose text
    is "cannot listen on HOST:PORT[ for PURPOSE]: <reason>"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        what = f" for {purpose}" if purpose else ""
        raise OSError(exc.errno, f"cannot listen on {host}:{port}{what}: {exc.strerror}") from None
    return sock
