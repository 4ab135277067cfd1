"""Each worker's own client listener, advertised in Metadata as a broker node of its own.

Why: the kernel spreads connections on the shared client port over the workers
(SO_REUSEPORT), and a partition has one owning worker, so a request for partitions of both
workers is split and half of it forwarded over IPC (pickled, sent, unpickled, answered the
same way back). A producer with linger.ms=0 sends one small request per record: at 10 MiB/s
of 1 KiB records that is ~10,000 forwards a second, and on a 2-core machine the hop pushed
publish p99 from 7 ms (one worker) to 144 ms (two workers) (docs/BENCHMARKS.md). Kafka
clients already know how to route per partition: they send each partition's requests to
its leader node. So each worker is advertised as a node and leads what it owns; a client
following Metadata never causes a forward, and the shared port remains the bootstrap,
coordinator and controller address (and forwards, as before, for clients that do not
route: raw tools, stale metadata).

How: the supervisor binds the listeners (``worker.listeners.port.base`` + i, or ports the
OS picks) before it forks, so a restarted worker gets the same port back and connections
made meanwhile wait in the backlog. Node ids are in broker/placement.py. Off with one
worker (nothing to route) or ``worker.listeners.enable=false``. In a cluster the ports are
part of the broker's ZooKeeper registration (coordination/znodes.py), so every broker
advertises every other broker's workers.
"""

from __future__ import annotations

import socket

from broker.config import BrokerConfig
from broker.placement import check_worker_nodes
from broker.tcp_bind import bind_exclusive


def worker_listeners_wanted(config: BrokerConfig) -> bool:
    return bool(config["worker.listeners.enable"]) and config.workers > 1


def bind_worker_listeners(config: BrokerConfig) -> list[socket.socket]:
    """One listening socket per worker (none when unwanted). Raises OSError or ValueError
    with a message naming the port when one cannot be had."""
    if not worker_listeners_wanted(config):
        return []
    check_worker_nodes(config.node_id, config.workers)
    host, _port = config.listener
    base = int(config["worker.listeners.port.base"])
    bound: list[socket.socket] = []
    try:
        for index in range(config.workers):
            port = base + index if base else 0
            if port > 65535:
                raise ValueError(f"worker {index}'s port {port} (worker.listeners.port.base + {index}) is past 65535")
            sock = bind_exclusive(host, port, f"worker {index}")
            bound.append(sock)
            sock.listen(int(config["socket.listen.backlog.size"]))
            sock.setblocking(False)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    config.worker_ports = tuple(sock.getsockname()[1] for sock in bound)
    return bound
