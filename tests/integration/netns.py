"""Real network partitions for multi-process tests, as Jepsen makes them, with Linux network namespaces.

    with Network() as net:
        zk = net.add("zk")                        # a namespace "csXXXX-zk", its address, e.g. "10.213.7.2"
        net.popen("zk", ["java", ...])            # runs inside it (ip netns exec)
        net.isolate("b1"); net.heal("b1")         # full partition: b1's bridge port down / up
        net.drop("b1", ["zk", "b2"]); net.undrop("b1")   # partial: nftables in b1's namespace

Every member has a namespace of its own, joined by a veth pair to a bridge that lives in one
more namespace; its address (SUBNET) exists only inside these namespaces: nothing here adds an
address, route or interface to the root namespace, and nothing sends traffic anywhere else.
Names are "cs" + 4 hex digits per instance, so concurrent runs never collide and interface
names stay far below the kernel's 15-character limit. ``close()`` (also at interpreter exit)
kills what runs in the namespaces, by PID, and deletes each namespace by name, pass or fail.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import uuid
from typing import Any, Iterator

import pytest

SUBNET = "10.213.7"  # a private /24 that exists only inside the namespaces a Network makes
TIMEOUT = 10.0  # every ip/nft call is bounded: a hung call fails the test instead of hanging it
TABLE = "castle_partition"  # the nftables table drop() adds and undrop() deletes


def _ip(*args: str, stdin: str | None = None, timeout: float = TIMEOUT) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited with {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class Network:
    def __init__(self) -> None:
        self.prefix = "cs" + uuid.uuid4().hex[:4]
        self.bridge_ns = f"{self.prefix}-br"
        self.members: dict[str, tuple[str, str, str]] = {}  # member -> (namespace, address, bridge-side port)
        self.namespaces: list[str] = []  # everything we made, in creation order, for close()
        self.processes: list[subprocess.Popen[Any]] = []
        self.closed = False
        atexit.register(self.close)  # safety net: a crashed test run still removes its namespaces
        try:
            self._add_namespace(self.bridge_ns)
            _ip("ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            _ip("ip", "-n", self.bridge_ns, "link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _add_namespace(self, name: str) -> None:
        _ip("ip", "netns", "add", name)
        self.namespaces.append(name)

    # ------------------------------------------------------------------ members
    def add(self, member: str) -> str:
        """A namespace for ``member`` on the bridge; returns its address."""
        assert member not in self.members, f"{member} added twice"
        index = len(self.members) + 2  # .1 is left unused (no gateway: there is nothing beyond the /24)
        assert index < 255
        namespace, port, address = f"{self.prefix}-{member}", f"{self.prefix}v{index}", f"{SUBNET}.{index}"
        self._add_namespace(namespace)
        # Both ends are created inside the namespaces (never in the root one): the port in the
        # bridge's namespace, its peer "eth0" moved straight into the member's.
        _ip("ip", "-n", self.bridge_ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("ip", "-n", self.bridge_ns, "link", "set", port, "master", "br0")
        _ip("ip", "-n", self.bridge_ns, "link", "set", port, "up")
        _ip("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("ip", "-n", namespace, "link", "set", "eth0", "up")
        _ip("ip", "-n", namespace, "link", "set", "lo", "up")  # a broker's workers talk over its loopback
        self.members[member] = (namespace, address, port)
        return address

    def address(self, member: str) -> str:
        return self.members[member][1]

    def namespace(self, member: str) -> str:
        return self.members[member][0]

    def wrap(self, member: str, args: list[str]) -> list[str]:
        """``args`` as a command line that runs inside ``member``'s namespace (ip netns exec
        execs the command: its PID is the process's own, so signals by PID reach it)."""
        return ["ip", "netns", "exec", self.namespace(member)] + list(args)

    def popen(self, member: str, args: list[str], **kwargs: Any) -> "subprocess.Popen[Any]":
        """Start ``args`` in ``member``'s namespace, in a session of its own (so a test can
        SIGSTOP or SIGKILL its whole process group); close() kills it if it is still alive."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("start_new_session", True)
        process = subprocess.Popen(self.wrap(member, args), **kwargs)
        self.processes.append(process)
        return process

    def run(self, member: str, args: list[str], timeout: float = TIMEOUT, **kwargs: Any) -> "subprocess.CompletedProcess[str]":
        """A short command in ``member``'s namespace, to its end (bounded); stdout and stderr captured."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.wrap(member, args), capture_output=True, text=True, timeout=timeout, **kwargs)

    # ------------------------------------------------------------------ faults
    def isolate(self, member: str) -> None:
        """Full partition: its bridge port goes down, and every packet to or from it is dropped
        on the way (silently, as on a real cut: senders see timeouts, not resets)."""
        _ip("ip", "-n", self.bridge_ns, "link", "set", self.members[member][2], "down")

    def heal(self, member: str) -> None:
        _ip("ip", "-n", self.bridge_ns, "link", "set", self.members[member][2], "up")

    def drop(self, member: str, peers: list[str]) -> None:
        """Partial partition: ``member`` stops exchanging packets with ``peers`` (only them: it
        still reaches every other member). A table of its own in the member's namespace drops
        their addresses on input and output; undrop() deletes the table."""
        addresses = ", ".join(self.address(peer) for peer in peers)
        rules = (f"table inet {TABLE} {{\n"
                 f"  chain input {{ type filter hook input priority 0; policy accept; ip saddr {{ {addresses} }} drop; }}\n"
                 f"  chain output {{ type filter hook output priority 0; policy accept; ip daddr {{ {addresses} }} drop; }}\n"
                 "}\n")
        _ip(*self.wrap(member, ["nft", "-f", "-"]), stdin=rules)

    def undrop(self, member: str) -> None:
        _ip(*self.wrap(member, ["nft", "delete", "table", "inet", TABLE]))

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Kill what we started and anything else still inside our namespaces (by PID), then
        delete every namespace by name. Idempotent; never raises (it runs in finalizers)."""
        if self.closed:
            return
        self.closed = True
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # its own session: pgid == pid
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        for namespace in reversed(self.namespaces):
            try:
                # Whatever the test started there some other way (a broker's workers, say):
                # a namespace that still holds processes would outlive its name.
                for pid in _ip("ip", "netns", "pids", namespace).split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                pass
            try:
                _ip("ip", "netns", "del", namespace)  # takes the veth pair with it
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        atexit.unregister(self.close)


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y iproute2 nftables)"
    return None


@pytest.fixture
def network() -> Iterator[Network]:
    """A Network for one test, closed after it whatever happened. Missing root or tools is a
    failure, not a skip: sessions and CI run as root and must exercise partitions."""
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"network partitions cannot run here: {reason}")
    net = Network()
    try:
        yield net
    finally:
        net.close()
