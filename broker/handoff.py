"""Move a client connection to the worker that owns the partitions it produces to.

Why: the kernel picks a worker for each connection (SO_REUSEPORT), so a producer's
connection lands on a worker that does not own its partition about (workers-1)/workers of
the time, and then every Produce request crosses the IPC hop: pickled, copied through a
Unix socket, unpickled, copied again into the log. For a single-partition producer of
~1 MB requests that hop cost as much CPU as the append itself (docs/BENCHMARKS.md). When a
connection's Produce requests all go to one other worker, the connection itself is handed
to that worker once, at a request boundary, and its later requests are served there with
no hop. Forwarding stays the general path (requests that span owners, fetches, admin).

How: each worker slot has a Unix datagram socket bound by the supervisor at
``<run.dir>/worker-<i>.handoff`` (it outlives worker restarts, like the IPC listener). The
sending worker passes the client socket's fd with SCM_RIGHTS and closes its own copy; the
kernel keeps the connection open in between. Because the supervisor holds the bound
socket, a handed-over connection waits in the queue while its new worker restarts. The
sender hands over only when nothing of the connection is left in user space: no request
in flight, no response unsent, no bytes read past the last whole frame (the connection
reads exactly up to a frame boundary once a handoff is pending), so what the client sent
next is still in the kernel's socket buffer for the new worker to read. Responses
therefore stay in request order across the move.
"""

from __future__ import annotations

import array
import asyncio
import logging
import os
import socket
from typing import Callable

log = logging.getLogger(__name__)

MAX_FDS_PER_MESSAGE = 1



def bind_unix(path: str, kind: socket.SocketKind) -> socket.socket:
    """A Unix socket bound at ``path`` (a stale file there is replaced), inheritable: the
    supervisor binds each worker's handoff socket so that it outlives worker restarts."""
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(path)
    sock.set_inheritable(True)
    return sock

def handoff_path(run_dir: str, index: int) -> str:
    return os.path.join(run_dir, f"worker-{index}.handoff")


def make_handoff_socket(run_dir: str, index: int) -> socket.socket:
    """Bind worker ``index``'s handoff socket (done by the supervisor, inherited by the worker)."""
    return bind_unix(handoff_path(run_dir, index), socket.SOCK_DGRAM)


class HandoffSender:
    """Passes client sockets to other workers. Never blocks: a full queue or a missing
    peer socket means no handoff, and the connection stays where it is."""

    def __init__(self, run_dir: str) -> None:
        self._run_dir = run_dir
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)

    def send(self, target: int, client: socket.socket) -> bool:
        try:
            # sendmsg, not socket.send_fds: send_fds ignores its address argument.
            self._sock.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [client.fileno()]))],
                               0, handoff_path(self._run_dir, target))
        except OSError as exc:
            log.info("connection stays: handoff to worker %d failed: %s", target, exc)
            return False
        return True

    def close(self) -> None:
        self._sock.close()


class HandoffReceiver:
    """Adopts the client sockets other workers pass to this one."""

    def __init__(self, sock: socket.socket, adopt: Callable[[socket.socket], None]) -> None:
        self._sock = sock
        self._adopt = adopt
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._sock.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), self._receive)

    def _receive(self) -> None:
        while True:
            try:
                _data, fds, _flags, _address = socket.recv_fds(self._sock, 16, MAX_FDS_PER_MESSAGE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("handoff receive failed: %s", exc)
                return
            for fd in fds:
                try:
                    client = socket.socket(fileno=fd)
                except OSError:
                    os.close(fd)
                    continue
                self._adopt(client)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
