"""A worker process: its own uvloop loop, its own SO_REUSEPORT listener, its partitions.

Start (after fork, nothing inherited but plain fds, P12):
    1. name the process, create the uvloop loop, install signal handlers (flags only)
    2. open the logs of the partitions it owns (recovery happens here)
    3. serve the other processes' calls on the rings (broker/links/mesh.py), then bind the
       client port with SO_REUSEPORT
    4. heartbeat from inside the loop (a wedged loop stops the heartbeat, P11)
    5. report "<index> <pid>" on the supervisor's ready pipe (READY=1 to systemd when all did)

Graceful stop on SIGTERM/SIGINT:
    1. stop accepting (close the listener; the kernel sends new connections to others)
       and stop reading requests on the open connections
    2. answer parked long-polls now, and let in-flight requests finish
       (bounded by graceful.shutdown.timeout.ms)
    3. close connections, flush and close the logs, exit 0
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time

from broker import apis
from broker.config import BrokerConfig
from broker.links.rings import SharedRings
from broker.listeners import Listener
from broker.network.acceptor import Acceptor
from broker.network.connection import Connection
from broker.network.memory import keep_freed_memory
from broker.process import stop_signal
from broker.process.gc_freeze import freeze_long_lived
from broker.process.heartbeats import HeartbeatSlot
from broker.process.logs import set_role
from broker.process.loop_lag import LoopLagProbe
from broker.process.node import WorkerNode

log = logging.getLogger(__name__)

BOOT_ERROR = 3  # exit code: the worker cannot start; the supervisor stops the broker


def run_worker(config: BrokerConfig, index: int, count: int, run_dir: str, cluster_id: str,
               clean_shutdown: bool, rings: SharedRings, heartbeat: HeartbeatSlot, ready_fd: int = -1) -> int:
    from setproctitle import setproctitle

    setproctitle(f"castle[{config.node_id}]: worker {index}")
    set_role(f"worker {index}")
    keep_freed_memory()
    import uvloop

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        node = WorkerNode(config, index, count, run_dir, cluster_id, clean_shutdown, rings)
        node.open()
    except Exception:
        log.exception("worker %d cannot open its logs", index)
        return BOOT_ERROR
    server = WorkerServer(node, heartbeat, ready_fd)
    freeze_long_lived()  # its logs and config live as long as it does
    try:
        return loop.run_until_complete(server.serve())
    finally:
        loop.close()


class WorkerServer:
    def __init__(self, node: WorkerNode, heartbeat: HeartbeatSlot, ready_fd: int = -1) -> None:
        self.node = node
        self.ready_fd = ready_fd  # the supervisor's ready pipe (write end), -1: none
        self.heartbeat = heartbeat
        self.connections: set[Connection] = node.connections
        self.acceptors: list[Acceptor] = []
        self.stopping = asyncio.Event()
        self.parent = os.getppid()

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        if stop_signal.requested:  # it came before the loop handled signals
            self.stopping.set()
        loop.add_signal_handler(signal.SIGHUP, self.node.reload_settings)
        apis.load_all()
        self.node.start()
        for index, listener in enumerate(self.node.config.listeners.bound):
            try:
                sock = self._bind(listener)
            except OSError as exc:
                log.error("worker %d cannot listen on %s: %s", self.node.index, listener, exc)
                return BOOT_ERROR
            acceptor = Acceptor(sock, listener, index, self.node.connection_quotas, self._serve)
            self.acceptors.append(acceptor)
            acceptor.start()
        housekeeping = loop.create_task(self.node.housekeeping(self.heartbeat))
        # Only for the metrics endpoint: with metrics off nothing would read the figures.
        loop_lag = LoopLagProbe(loop, self.node.metrics.loop_late)
        if self.node.metrics.on:
            loop_lag.start()
        orphan_watch = loop.create_task(self._exit_if_orphaned())
        idle_reaper = loop.create_task(self._close_idle_connections())
        log.info("worker %d (pid %d) serving %s", self.node.index, os.getpid(),
                 ",".join(str(acceptor.listener) for acceptor in self.acceptors))
        self._report_ready()
        await self.stopping.wait()
        await self._stop()
        housekeeping.cancel()
        loop_lag.stop()
        orphan_watch.cancel()
        idle_reaper.cancel()
        return 0

    def _report_ready(self) -> None:
        """Tell the supervisor this worker serves: its logs are open (recovered) and its
        listeners accept. One line, below PIPE_BUF, so it arrives whole."""
        if self.ready_fd < 0:
            return
        try:
            os.write(self.ready_fd, f"{self.node.index} {os.getpid()}\n".encode())
        except OSError as exc:
            log.warning("worker %d cannot report readiness to the supervisor: %s", self.node.index, exc)
        finally:
            os.close(self.ready_fd)
            self.ready_fd = -1

    def _bind(self, listener: Listener) -> socket.socket:
        host, port = listener.host, listener.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(self.node.config.get_int("socket.listen.backlog.size"))
        sock.setblocking(False)
        return sock

    def _serve(self, client: socket.socket, listener: Listener, index: int, address: str) -> None:
        """A connection the listener's acceptor admitted: serve it; its count ends when it closes."""
        config = self.node.config
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option, size in ((socket.SO_SNDBUF, config.get_int("socket.send.buffer.bytes")),
                             (socket.SO_RCVBUF, config.get_int("socket.receive.buffer.bytes"))):
            if size > 0:
                client.setsockopt(socket.SOL_SOCKET, option, size)
        self.node.stats["connections"] += 1
        quotas = self.node.connection_quotas
        Connection(client, self.node, self.connections, listener).on_close(lambda: quotas.closed(index, address))

    async def _close_idle_connections(self) -> None:
        """Close connections with nothing in flight and no traffic for
        connections.max.idle.ms, as Kafka does (negative: never)."""
        limit_ms = self.node.config.get_int("connections.max.idle.ms")
        if limit_ms < 0:
            return
        limit = limit_ms / 1000
        while True:
            await asyncio.sleep(min(1.0, max(0.05, limit / 4)))
            deadline = time.monotonic() - limit
            for connection in list(self.connections):
                if connection.idle and connection.last_active < deadline:
                    log.debug("closing %s: idle for more than %d ms", connection.peer, limit_ms)
                    connection.close()

    async def _exit_if_orphaned(self) -> None:
        """A worker whose supervisor died (kill -9) stops itself instead of lingering."""
        while True:
            await asyncio.sleep(1)
            if os.getppid() != self.parent:
                log.error("worker %d: supervisor is gone, stopping", self.node.index)
                self.stopping.set()
                return

    async def _stop(self) -> None:
        for acceptor in self.acceptors:
            acceptor.close()
        # Stop reading requests before waiting for the in-flight ones: a connection that
        # keeps reading is never idle under a busy producer, and a new request forwarded
        # to a worker that has already stopped would fail.
        for connection in list(self.connections):
            connection.drain()
        self.node.purgatory.wake_all()
        deadline = time.monotonic() + self.node.config.get_int("graceful.shutdown.timeout.ms") / 1000
        while time.monotonic() < deadline and not all(c.idle for c in self.connections):
            self.node.purgatory.wake_all()
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            connection.close()
        await self.node.replica_fetcher.close()
        self.node.close()
        log.info("worker %d stopped cleanly", self.node.index)
