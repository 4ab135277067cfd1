"""A small client for systemd's service notification protocol (sd_notify(3)).

Under ``Type=notify`` systemd passes ``NOTIFY_SOCKET``: the address of an AF_UNIX datagram
socket, a filesystem path, or an abstract name when it starts with ``@``. The service
sends newline-separated ``KEY=VALUE`` assignments to it, one message per datagram:
``READY=1`` when it serves, ``STATUS=...`` for ``systemctl status``, ``STOPPING=1`` when
a graceful stop begins, ``WATCHDOG=1`` every half ``WatchdogSec`` (systemd passes the
interval as ``WATCHDOG_USEC``, and ``WATCHDOG_PID`` naming the process it watches).

Rules this module keeps:

* Without ``NOTIFY_SOCKET`` (not run by systemd, or another Type=) every call is a no-op.
* It never raises into the broker: a send that fails logs one warning (then stays quiet)
  and returns False. The broker runs the same with or without systemd.
* Only the process that created the notifier sends: forked children (workers, the
  coordinator) inherit the object but their calls are no-ops, so with ``NotifyAccess=main``
  nothing a child does is ever rejected or mistaken for the main process's word.
* ``from_environment(unset=True)`` removes the variables from ``os.environ``, as
  sd_notify's ``unset_environment`` does, so a program exec'ed later cannot talk for us.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Mapping

log = logging.getLogger(__name__)

ENV_SOCKET = "NOTIFY_SOCKET"
ENV_WATCHDOG_USEC = "WATCHDOG_USEC"
ENV_WATCHDOG_PID = "WATCHDOG_PID"
SEND_TIMEOUT = 2.0  # seconds; systemd reads its notify socket at once, a full queue means trouble


def _address(value: str) -> bytes | None:
    """NOTIFY_SOCKET's value as a bind/sendto address, None when unusable."""
    if value.startswith("@"):
        return b"\0" + os.fsencode(value[1:])  # Linux abstract namespace
    if value.startswith("/"):
        return os.fsencode(value)
    return None  # e.g. systemd's "vsock:CID:PORT" (VMs), not supported here


def _clean(text: str) -> str:
    """One assignment per line: a newline inside a value would start a new assignment."""
    return " ".join(str(text).split("\n"))


class Notifier:
    """Sends notifications to systemd, or nothing when not asked to."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address or None
        self._target = _address(address) if address else None
        self._watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self._owner = os.getpid()
        self._sock: socket.socket | None = None
        self._warned = False
        if self.address and self._target is None:
            self._warn(f"{ENV_SOCKET}={self.address!r} is not a path or an abstract (@) name: not notifying")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, unset: bool = False) -> "Notifier":
        """From NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (``os.environ`` by default).

        The watchdog is ours only when WATCHDOG_PID is unset or names this process: the
        variables may have leaked from a parent that systemd watches."""
        env = os.environ if environ is None else environ
        address = env.get(ENV_SOCKET, "")
        usec: int | None = None
        text = env.get(ENV_WATCHDOG_USEC, "")
        if text:
            try:
                usec = int(text)
            except ValueError:
                log.warning("ignoring %s=%r: not an integer", ENV_WATCHDOG_USEC, text)
            watched = env.get(ENV_WATCHDOG_PID, "")
            if usec is not None and watched:
                try:
                    if int(watched) != os.getpid():
                        usec = None
                except ValueError:
                    usec = None
        if unset and environ is None:
            for key in (ENV_SOCKET, ENV_WATCHDOG_USEC, ENV_WATCHDOG_PID):
                os.environ.pop(key, None)
        return cls(address, usec)

    # ------------------------------------------------------------------ queries
    @property
    def enabled(self) -> bool:
        """True when there is a socket to notify (and this is the process that owns it)."""
        return self._target is not None and os.getpid() == self._owner

    def watchdog_interval(self) -> float | None:
        """WatchdogSec in seconds (ping at half of it at the latest), None when unset."""
        if self._watchdog_usec is None:
            return None
        return self._watchdog_usec / 1_000_000

    # ------------------------------------------------------------------ messages
    def ready(self, status: str | None = None) -> bool:
        return self.notify("READY=1", *([f"STATUS={_clean(status)}"] if status else []))

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={_clean(text)}")

    def stopping(self, status: str | None = None) -> bool:
        return self.notify("STOPPING=1", *([f"STATUS={_clean(status)}"] if status else []))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def notify(self, *assignments: str) -> bool:
        """Send one datagram of ``KEY=VALUE`` lines; True if it was sent."""
        if not assignments or not self.enabled:
            return False
        assert self._target is not None
        try:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                sock.settimeout(SEND_TIMEOUT)
                self._sock = sock
            self._sock.sendto("\n".join(assignments).encode(), self._target)
            return True
        except (OSError, ValueError) as exc:
            self._warn(f"cannot notify systemd at {self.address}: {exc}")
            return False

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s (further notification errors are not logged)", message)
