"""One listener's accept loop in one worker, with Kafka's connection quotas on the way in.

A worker binds each listener with SO_REUSEPORT and accepts its own connections on its event
loop. Each accepted connection goes through broker/network/connection_quotas.py in Kafka's
order, and the acceptor does what Kafka's Acceptor thread does with the answer, without ever
blocking the loop:

* over the broker's or the listener's creation rate: the connection is held and nothing more
  is accepted on this listener for the throttle time (Kafka's acceptor sleeps that long);
* no slot (max.connections): the connection is held and nothing more is accepted until a slot
  frees: at once when one of this worker's connections closes, else found by asking again
  every SLOT_POLL seconds (another worker's close cannot ring here);
* over the address's creation rate: closed unanswered once the throttle time passed;
* over max.connections.per.ip: closed at once;
* else handed to ``serve``, counted until it closes.

Meanwhile new connections wait in the kernel's backlog, as they do while Kafka's acceptor waits.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable

from broker.listeners import Listener
from broker.network.connection_quotas import ADMITTED, REFUSED, WAIT, ConnectionQuotas, accepted_address

log = logging.getLogger(__name__)

ACCEPTS_PER_WAKE = 64  # then the loop serves others before accepting more
ACCEPT_BACKOFF_MS = 100
SLOT_POLL = 0.025

Serve = Callable[[socket.socket, Listener, int, str], None]  # (socket, listener, its index, address)


class Acceptor:
    def __init__(self, sock: socket.socket, listener: Listener, index: int, quotas: ConnectionQuotas,
                 serve: Serve) -> None:
        self.sock = sock
        self.listener = listener
        self.index = index  # the listener's position in the broker's listeners
        self.quotas = quotas
        self.serve = serve
        self.loop = asyncio.get_running_loop()
        self._fd = sock.fileno()
        self._reading = False
        self._stopped = False
        self._held: tuple[socket.socket, str] | None = None  # accepted, not yet admitted
        self._timer: asyncio.Handle | None = None  # the held connection's next try
        self._waiting_slot = False  # the held connection waits for a slot (not a rate's delay)
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # closed when their time comes
        quotas.slot_freed.append(self._slot_freed)

    def start(self) -> None:
        self._listen()

    def _listen(self) -> None:
        if not self._reading and not self._stopped:
            self.loop.add_reader(self._fd, self._accept_ready)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self.loop.remove_reader(self._fd)
            self._reading = False

    # ------------------------------------------------------------------ accepting
    def _accept_ready(self) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            if self._held is not None or self._stopped:
                return
            try:
                client, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Out of descriptors (EMFILE/ENFILE) or kernel memory: the pending connection
                # stays queued and the listener readable, so retrying at once would spin the
                # worker writing this line. Stop accepting for a moment; closes free what is needed.
                log.warning("accept failed: %s; not accepting for %d ms", exc, ACCEPT_BACKOFF_MS)
                self._pause()
                self._timer = self.loop.call_later(ACCEPT_BACKOFF_MS / 1000, self._resume)
                return
            client.setblocking(False)
            self._held = (client, accepted_address(address[0]))
            delay_ms = self.quotas.creation_delay_ms(self.index)
            if delay_ms > 0:
                self._pause()
                self._timer = self.loop.call_later(delay_ms / 1000, self._admit_held)
                return
            if not self._admit_held():
                return

    def _resume(self) -> None:
        self._timer = None
        self._listen()

    def _admit_held(self) -> bool:
        """The held connection's turn: False while it waits for a slot."""
        self._timer = None
        self._waiting_slot = False
        held = self._held
        if held is None or self._stopped:
            return True
        client, address = held
        answer = self.quotas.admit(self.index, address)
        if answer == WAIT:
            self._pause()
            self._waiting_slot = True
            self._timer = self.loop.call_later(SLOT_POLL, self._admit_held)
            return False
        self._held = None
        if answer == ADMITTED:
            try:
                self.serve(client, self.listener, self.index, address)
            except Exception:
                log.exception("cannot serve a connection from %s", address)
                self.quotas.closed(self.index, address)
                client.close()
        elif answer == REFUSED:
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     address, self.quotas.max_for(address))
            client.close()
        else:
            log.debug("Delaying closing of connection from %s for %d ms", address, answer)
            self._throttled[client] = self.loop.call_later(answer / 1000, self._close_throttled, client)
        self._listen()
        return True

    def _slot_freed(self) -> None:
        """A slot may be free: a held connection waiting for one tries now."""
        if self._waiting_slot and self._timer is not None and not self._stopped and self.quotas.slot_free(self.index):
            self._timer.cancel()
            self._timer = self.loop.call_soon(self._admit_held)

    def _close_throttled(self, client: socket.socket) -> None:
        self._throttled.pop(client, None)
        client.close()

    # ------------------------------------------------------------------ stopping
    def close(self) -> None:
        """Stop accepting; close the listening socket and every connection not yet served."""
        self._stopped = True
        self._pause()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held is not None:
            self._held[0].close()
            self._held = None
        for client, timer in self._throttled.items():
            timer.cancel()
            client.close()
        self._throttled.clear()
        if self._slot_freed in self.quotas.slot_freed:
            self.quotas.slot_freed.remove(self._slot_freed)
        self.sock.close()
