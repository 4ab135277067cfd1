"""A throwaway ZooKeeper for tests: Debian's ``zookeeper`` package run as a child process.

    server = ZooKeeperServer()
    server.start()              # zoo.cfg in a temp dir, a free loopback port, waits for "srvr"
    server.address              # "127.0.0.1:PORT"
    server.stop()               # SIGTERM, then SIGKILL, by its own PID; removes the temp dir

zoo.cfg uses tickTime=500 so sessions can be as short as 1 s (minSessionTimeout is two
ticks), forceSync=no (the tests measure coordination, not fsync) and a small log
preallocation. The classpath is restricted to the three jars the standalone server needs
(zookeeper, zookeeper-jute, slf4j-api; slf4j-simple when present, for its log): with
"/usr/share/java/*" the JVM also finds four slf4j bindings and complains about each.
Readiness is the ``srvr`` four-letter word answering "Zookeeper version" (``ruok`` is not
whitelisted by default in 3.5+; ``srvr`` is, and we whitelist both).

``expire_session`` forces a session to expire the way kazoo's own test harness does: a
second client attaches to the same session (id and password) and closes it; the server
ends the session, and the original client hears SESSION_EXPIRED when it reconnects.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from loadtest.brokers import free_port as choose_free_port

JAVA_DIR = "/usr/share/java"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
REQUIRED_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar")
OPTIONAL_JARS = ("slf4j-simple.jar",)
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def classpath() -> str | None:
    """The jars ZooKeeperServerMain needs, or None when the package is not installed."""
    jars = [os.path.join(JAVA_DIR, name) for name in REQUIRED_JARS]
    if not all(os.path.exists(jar) for jar in jars):
        return None
    jars += [os.path.join(JAVA_DIR, name) for name in OPTIONAL_JARS if os.path.exists(os.path.join(JAVA_DIR, name))]
    return os.pathsep.join(jars)


def unavailable_reason() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH"
    if classpath() is None:
        return f"ZooKeeper is not installed ({JAVA_DIR}/zookeeper.jar missing; apt-get install zookeeper)"
    return None


# Ports this process has handed out, each held by an flock on a file of its own: the test
# processes (xdist workers) never hand out the same port while both live. A port free now can
# otherwise go to two workers starting brokers in the same second; with SO_REUSEPORT both
# brokers bind it and share its connections (seen once: two tests' brokers on one port).
_PORT_LOCKS_DIR = os.path.join(tempfile.gettempdir(), "castle-test-ports")
_held_port_locks: list[int] = []


def _reserve(port: int) -> bool:
    os.makedirs(_PORT_LOCKS_DIR, exist_ok=True)
    fd = os.open(os.path.join(_PORT_LOCKS_DIR, str(port)), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held_port_locks.append(fd)  # released when this process exits
    return True


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range (loadtest.brokers.free_port says
    why), never one another live test process was given (``_reserve``)."""
    return choose_free_port(_reserve)


def four_letter_word(host: str, port: int, word: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


class ZooKeeperServer:
    def __init__(self, tick_ms: int = 500) -> None:
        self.tick_ms = tick_ms
        self.host = "127.0.0.1"
        self.port = 0
        self.dir: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = START_TIMEOUT) -> None:
        cp = classpath()
        if cp is None:
            raise RuntimeError(unavailable_reason() or "ZooKeeper is not installed")
        self.dir = tempfile.mkdtemp(prefix="castle-zk-")
        deadline = time.monotonic() + timeout
        # The port is free when we look, but another process may take it before the JVM
        # binds it: then the server exits and we try another port.
        for _ in range(3):
            self.port = free_port()
            self._launch(cp)
            if self._wait_ready(deadline):
                return
            self._kill()
            if time.monotonic() > deadline:
                break
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"ZooKeeper did not start within {timeout} s; its log ends with:\n{tail}")

    def _launch(self, cp: str) -> None:
        assert self.dir is not None
        data_dir = os.path.join(self.dir, "data")
        os.makedirs(data_dir, exist_ok=True)
        config = os.path.join(self.dir, "zoo.cfg")
        with open(config, "w", encoding="ascii") as handle:
            handle.write(
                f"tickTime={self.tick_ms}\n"
                f"dataDir={data_dir}\n"
                f"clientPort={self.port}\n"
                f"clientPortAddress={self.host}\n"
                "admin.enableServer=false\n"
                "maxSessionTimeout=60000\n"
                "maxClientCnxns=0\n"
                "forceSync=no\n"
                "preAllocSize=1024\n"
                "4lw.commands.whitelist=srvr,ruok\n"
            )
        log = open(os.path.join(self.dir, "zookeeper.log"), "ab")
        try:
            self.proc = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, MAIN_CLASS, config],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        finally:
            log.close()

    def _wait_ready(self, deadline: float) -> bool:
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if b"Zookeeper version" in four_letter_word(self.host, self.port, b"srvr"):
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def log_tail(self, limit: int = 4000) -> str:
        if self.dir is None:
            return ""
        try:
            with open(os.path.join(self.dir, "zookeeper.log"), "rb") as handle:
                return handle.read()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT)

    def stop(self) -> None:
        self._kill()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def expire_session(hosts: str, session_id: int, password: bytes, timeout: float = 10.0) -> None:
    """End a live session from outside, as if it had timed out (see the module docstring)."""
    from kazoo.client import KazooClient

    thief = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=5.0)
    thief.start(timeout=timeout)
    try:
        thief.stop()  # sends closeSession for the stolen session
    finally:
        thief.close()
