"""Castle as a systemd service: the unit in deploy/, and the notify protocol (broker/process/sd_notify.py).

No systemd runs here, so the tests play its part: they bind the AF_UNIX datagram socket
that NOTIFY_SOCKET names (SO_PASSCRED on, so each datagram carries its sender's pid, as
systemd sees it for NotifyAccess=main), start a real ``castle serve`` with it, and check
what arrives and when: READY=1 only once every worker serves, STATUS= lines, STOPPING=1
on SIGTERM, WATCHDOG=1 pings, all from the supervisor. The unit itself is checked with
``systemd-analyze verify`` and by reading its directives.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterator

import pytest

from broker.config import BY_NAME, load_config, read_properties
from broker.process.sd_notify import Notifier
from tests.integration.conftest import Broker, castle_command, round_trip, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEPLOY = os.path.join(ROOT, "deploy")
UNIT = os.path.join(DEPLOY, "castle.service")
PROPERTIES = os.path.join(DEPLOY, "castle.properties")
ZOOKEEPER_DROP_IN = os.path.join(DEPLOY, "castle-zookeeper.conf")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
NOTIFY_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
READY_TIMEOUT = 60.0  # the slowed start recovers a log first
STOP_BOUND = 30.0  # SIGTERM to exit of an idle broker


# ---------------------------------------------------------------------- a stand-in for systemd
@dataclass
class Message:
    at: float  # time.time() when received
    pid: int  # the sender, from SCM_CREDENTIALS
    fields: dict[str, str] = field(default_factory=dict)


class NotifySocket:
    """The datagram socket NOTIFY_SOCKET names: a path, or '@name' for an abstract one."""

    def __init__(self, abstract: bool = False) -> None:
        self.dir = tempfile.mkdtemp(prefix="sd", dir="/tmp")  # sun_path is 108 bytes
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        if abstract:
            name = f"castle-test-{uuid.uuid4().hex}"
            self.sock.bind(b"\0" + name.encode())
            self.env_value = "@" + name
        else:
            path = os.path.join(self.dir, "notify")
            self.sock.bind(path)
            self.env_value = path
        self.messages: list[Message] = []

    def receive(self, timeout: float) -> Message | None:
        self.sock.settimeout(max(0.001, timeout))
        try:
            data, ancillary, _flags, _address = self.sock.recvmsg(4096, socket.CMSG_SPACE(struct.calcsize("3i")))
        except (socket.timeout, BlockingIOError):
            return None
        pid = -1
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid, _uid, _gid = struct.unpack("3i", payload[:struct.calcsize("3i")])
        fields = {}
        for line in data.decode().split("\n"):
            key, _sep, value = line.partition("=")
            fields[key] = value
        message = Message(time.time(), pid, fields)
        self.messages.append(message)
        return message

    def wait_for(self, key: str, timeout: float, on_message: Callable[[Message], None] | None = None) -> Message:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {key} within {timeout} s; got {[m.fields for m in self.messages]}")
            message = self.receive(remaining)
            if message is None:
                continue
            if on_message is not None:
                on_message(message)
            if key in message.fields:
                return message

    def drain(self, seconds: float) -> list[Message]:
        got = []
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            message = self.receive(remaining)
            if message is not None:
                got.append(message)
        return got

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def notify_socket() -> Iterator[Callable[..., NotifySocket]]:
    made: list[NotifySocket] = []

    def make(abstract: bool = False) -> NotifySocket:
        made.append(NotifySocket(abstract))
        return made[-1]

    yield make
    for sock in made:
        sock.close()


def launch(broker: Broker, env: dict[str, str], config_file: str | None = None, watchdog_pid_self: bool = False) -> None:
    """Start ``castle serve`` like systemd would (env, no waiting): the caller watches the
    notify socket. The broker_factory finalizer stops it by PID whatever happens."""
    args = broker.command()
    if config_file:
        args.insert(args.index("serve") + 1, config_file)
    if watchdog_pid_self:
        # systemd sets WATCHDOG_PID to the main pid; exec keeps the shell's pid.
        args = ["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"', "sh", *args]
    full_env = {k: v for k, v in os.environ.items() if k not in NOTIFY_ENV}
    full_env.update(env)
    broker.starts += 1
    with open(broker.stderr_path, "ab") as err:
        err.write(f"----- start #{broker.starts} (notify {env}): {' '.join(args)}\n".encode())
        err.flush()
        broker.process = subprocess.Popen(args, env=full_env, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                          start_new_session=True)


def last_start_log(broker: Broker) -> list[str]:
    lines = broker.stderr(tail=100000).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("----- start #")]
    return lines[starts[-1]:] if starts else lines


def log_time(line: str) -> float:
    """The wall time of a log line ("2026-01-02 03:04:05,678 pid LEVEL ...", local time)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def stop_and_expect_stopping(broker: Broker, notify: NotifySocket) -> Message:
    """SIGTERM: STOPPING=1 arrives, and castle serve exits 0 within STOP_BOUND."""
    started = time.monotonic()
    code = broker.stop(timeout=STOP_BOUND)
    took = time.monotonic() - started
    assert code == 0 and took < STOP_BOUND, (code, took)
    stopping = notify.wait_for("STOPPING", 5.0)
    assert stopping.fields["STOPPING"] == "1"
    assert stopping.fields.get("STATUS", "").startswith("stopping")
    final = notify.drain(0.3)
    assert any(m.fields.get("STATUS") == "stopped" for m in final), [m.fields for m in notify.messages[-5:]]
    return stopping


# ---------------------------------------------------------------------- (b) READY, STOPPING
def test_ready_only_when_every_worker_serves_then_stopping_on_sigterm(broker_factory, notify_socket):
    """A slowed, uneven start: the broker was killed with -9 after taking ~48 MB, all of it
    in partitions of one worker, so that worker recovers them before it listens while the
    other serves at once. READY=1 must come after every worker logged that it serves, and
    at that moment the client port answers a round trip."""
    from confluent_kafka import Producer

    from broker.partitions.placement import owner_index
    from storage.types import TopicPartition

    topic = "slow-start"
    broker = broker_factory(workers=2, overrides={"num.partitions": 4, "log.segment.bytes": 4 * 1024 * 1024})
    slow = [p for p in range(4) if owner_index(TopicPartition(topic, p), 2) == 1]
    assert slow, "no partition of the topic belongs to worker 1"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "acks": 1})
    value = os.urandom(16 * 1024)
    for i in range(3000):
        while True:
            try:
                producer.produce(topic, value=value, partition=slow[i % len(slow)])
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    del producer
    broker.kill()  # kill -9: no clean-shutdown marker, the next start recovers every segment

    notify = notify_socket()
    probes: list[tuple[float, bool]] = []  # (time after the attempt, round trip answered)
    probing = threading.Event()

    def probe() -> None:
        while not probing.is_set():
            answered = round_trip(broker.host, broker.port, timeout=0.5)
            probes.append((time.time(), answered))
            time.sleep(0.01)

    launch(broker, {"NOTIFY_SOCKET": notify.env_value})
    prober = threading.Thread(target=probe)
    prober.start()
    try:
        ready = notify.wait_for("READY", READY_TIMEOUT)
        # At once: the client port serves.
        assert round_trip(broker.host, broker.port), "READY=1 but the client port does not answer"
    finally:
        probing.set()
        prober.join(10)
    assert ready.fields["READY"] == "1"
    assert ready.fields["STATUS"].startswith(f"serving on {broker.host}:{broker.port}, 2 workers"), ready.fields
    assert any(not answered for at, answered in probes if at < ready.at), "the port never refused before READY=1"

    # Ordering: every current worker said "serving" before READY=1 was sent.
    lines = last_start_log(broker)
    assert any("recovering start" in line for line in lines), "\n".join(lines[:5])
    pids = broker.worker_pids()
    assert len(pids) == 2
    serving = {pid: i for i, line in enumerate(lines) for pid in pids if f"(pid {pid}) serving" in line}
    ready_line = next(i for i, line in enumerate(lines) if "all 2 workers serving: ready" in line)
    assert set(serving) == set(pids) and max(serving.values()) < ready_line, "\n".join(lines)
    assert all(log_time(lines[i]) <= ready.at for i in serving.values())

    # Only the supervisor (the main pid) talks to systemd.
    assert {m.pid for m in notify.messages} == {broker.pid}
    statuses = [m.fields["STATUS"] for m in notify.messages if "STATUS" in m.fields]
    assert statuses[0].startswith("starting 2 workers (recovering"), statuses

    stop_and_expect_stopping(broker, notify)
    assert {m.pid for m in notify.messages} == {broker.pid}


def test_worker_restart_is_reported_in_status(broker_factory, notify_socket):
    broker = broker_factory(workers=2, start=False)
    notify = notify_socket()
    launch(broker, {"NOTIFY_SOCKET": notify.env_value})
    notify.wait_for("READY", READY_TIMEOUT)
    broker.wait_ready()
    victim = broker.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    restarting = notify.wait_for("STATUS", 10.0)
    assert "exited with signal 9: restarting it" in restarting.fields["STATUS"], restarting.fields

    def restarted() -> bool:
        message = notify.receive(0.5)
        return message is not None and "restarted (pid" in message.fields.get("STATUS", "")

    wait_until(restarted, 20.0, "the STATUS that the new worker serves")
    assert not [m for m in notify.messages if "READY" in m.fields][1:], "READY=1 is sent once"
    stop_and_expect_stopping(broker, notify)


# ---------------------------------------------------------------------- (c) watchdog
def test_watchdog_pings_at_half_the_interval(broker_factory, notify_socket):
    broker = broker_factory(workers=2, start=False)
    notify = notify_socket()
    launch(broker, {"NOTIFY_SOCKET": notify.env_value, "WATCHDOG_USEC": "400000"}, watchdog_pid_self=True)
    notify.wait_for("READY", READY_TIMEOUT)
    window = notify.drain(2.0)
    pings = [m.at for m in notify.messages if m.fields.get("WATCHDOG") == "1"]
    in_window = [m for m in window if m.fields.get("WATCHDOG") == "1"]
    assert len(in_window) >= 6, f"{len(in_window)} pings in 2 s at a 0.4 s watchdog"
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    assert max(gaps) < 0.4, f"a gap of {max(gaps):.3f} s would trip a 0.4 s watchdog"
    assert {m.pid for m in notify.messages} == {broker.pid}
    stop_and_expect_stopping(broker, notify)


# ---------------------------------------------------------------------- (d) abstract socket
def test_abstract_notify_socket_and_a_watchdog_meant_for_another_pid(broker_factory, notify_socket):
    """NOTIFY_SOCKET=@name. WATCHDOG_PID names another process: the watchdog is not ours."""
    broker = broker_factory(workers=1, start=False)
    notify = notify_socket(abstract=True)
    launch(broker, {"NOTIFY_SOCKET": notify.env_value, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"})
    ready = notify.wait_for("READY", READY_TIMEOUT)
    assert ready.pid == broker.pid
    assert ready.fields["STATUS"] == f"serving on {broker.host}:{broker.port}, 1 workers", ready.fields
    assert round_trip(broker.host, broker.port)
    notify.drain(0.6)
    assert not [m for m in notify.messages if "WATCHDOG" in m.fields]
    stop_and_expect_stopping(broker, notify)


# ---------------------------------------------------------------------- (e) sd_notify unit tests
def test_without_notify_socket_everything_is_a_no_op():
    notifier = Notifier.from_environment({})
    assert not notifier.enabled
    assert notifier.watchdog_interval() is None
    assert notifier.ready("serving") is False
    assert notifier.status("x") is False
    assert notifier.stopping() is False
    assert notifier.watchdog() is False
    notifier.close()


def test_a_missing_socket_warns_once_and_never_raises(caplog):
    notifier = Notifier("/nonexistent-castle-dir/notify")
    with caplog.at_level(logging.WARNING, logger="broker.process.sd_notify"):
        assert notifier.ready("serving") is False
        assert notifier.status("x") is False
        assert notifier.watchdog() is False
    warnings = [r for r in caplog.records if r.name == "broker.process.sd_notify"]
    assert len(warnings) == 1 and "cannot notify systemd" in warnings[0].getMessage()
    notifier.close()


@pytest.mark.parametrize("address", ["relative/path", "vsock:2:1234", "@"])
def test_unusable_addresses_do_not_raise(address):
    notifier = Notifier(address)
    assert notifier.ready() is False
    notifier.close()


def test_messages_on_a_real_socket_and_only_from_the_creating_process():
    notify = NotifySocket()
    try:
        notifier = Notifier.from_environment({"NOTIFY_SOCKET": notify.env_value})
        assert notifier.ready("serving on h:1,\n2 workers")
        message = notify.receive(2.0)
        assert message is not None and message.pid == os.getpid()
        assert message.fields == {"READY": "1", "STATUS": "serving on h:1, 2 workers"}
        assert notifier.stopping("bye") and notify.receive(2.0).fields == {"STOPPING": "1", "STATUS": "bye"}  # type: ignore[union-attr]
        assert notifier.watchdog() and notify.receive(2.0).fields == {"WATCHDOG": "1"}  # type: ignore[union-attr]
        pid = os.fork()
        if pid == 0:  # a forked worker inherits the notifier: its calls must do nothing
            os._exit(0 if notifier.status("from a child") is False and not notifier.enabled else 1)
        _pid, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert notify.receive(0.3) is None
        notifier.close()
    finally:
        notify.close()


def test_watchdog_interval_honours_watchdog_pid():
    me = str(os.getpid())
    assert Notifier.from_environment({"WATCHDOG_USEC": "400000"}).watchdog_interval() == 0.4
    assert Notifier.from_environment({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": me}).watchdog_interval() == 30.0
    assert Notifier.from_environment({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": "1"}).watchdog_interval() is None
    assert Notifier.from_environment({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": "x"}).watchdog_interval() is None
    assert Notifier.from_environment({"WATCHDOG_USEC": "nonsense"}).watchdog_interval() is None
    assert Notifier.from_environment({"WATCHDOG_USEC": "0"}).watchdog_interval() is None


def test_unset_removes_the_variables(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent-castle-dir/notify")
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    notifier = Notifier.from_environment(unset=True)
    assert notifier.address == "/nonexistent-castle-dir/notify" and notifier.watchdog_interval() == 1.0
    assert not any(key in os.environ for key in NOTIFY_ENV)


# ---------------------------------------------------------------------- (a) the unit
def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _sep, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def seconds(span: str) -> float:
    """A systemd time span as used in the unit ("90s", "30min", "1h 30min", "infinity")."""
    if span == "infinity":
        return float("inf")
    units = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "hr": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", span):
        total += float(number) * units[unit or "s"]
    return total


def test_the_unit_has_the_required_directives():
    with open(UNIT, encoding="utf-8") as handle:
        unit = parse_unit(handle.read())
    service, section = unit["Service"], unit["Unit"]

    def one(key: str) -> str:
        assert len(service.get(key, [])) == 1, f"{key}: {service.get(key)}"
        return service[key][0]

    assert one("Type") == "notify" and one("NotifyAccess") == "main"
    assert one("ExecStart").startswith("/opt/castle/venv/bin/castle serve /etc/castle/castle.properties")
    assert one("ExecReload") == "/bin/kill -HUP $MAINPID"
    assert one("Restart") == "on-failure"
    assert one("User") == "castle" and one("Group") == "castle"
    assert one("EnvironmentFile") == "-/etc/default/castle"
    assert one("RuntimeDirectory") == "castle"
    assert "/var/lib/castle" in one("ReadWritePaths").split()
    assert one("RestrictAddressFamilies").split() == ["AF_UNIX", "AF_INET", "AF_INET6"]
    assert int(one("LimitNOFILE")) >= 65536
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                       "PrivateDevices": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
                       "ProtectControlGroups": "yes"}.items():
        assert one(key) == value, key
    assert "network-online.target" in " ".join(section["After"]) and "network-online.target" in " ".join(section["Wants"])
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]

    config = load_config(PROPERTIES)
    # The data and run dirs of the example config are the ones the sandbox lets it write.
    assert config.log_dirs == ["/var/lib/castle"] and config.get_str("run.dir") == "/run/" + one("RuntimeDirectory")
    # Stop: workers get graceful.shutdown.timeout.ms, the supervisor 5 s more before SIGKILL.
    graceful = config.get_int("graceful.shutdown.timeout.ms") / 1000
    assert seconds(one("TimeoutStopSec")) > graceful + 5
    assert seconds(one("TimeoutStartSec")) >= 600, "recovery of a large log needs time"
    watchdog = seconds(one("WatchdogSec"))
    assert 1 <= watchdog <= 300

    with open(ZOOKEEPER_DROP_IN, encoding="utf-8") as handle:
        drop_in = parse_unit(handle.read())
    assert drop_in["Unit"] == {"After": ["zookeeper.service"], "Wants": ["zookeeper.service"]}


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian package: systemd)")
def test_systemd_analyze_verify_accepts_the_unit_and_the_drop_in(tmp_path):
    """Verified as installed, except that ExecStart is this venv's castle (verify wants an
    executable) and User/Group the current user (the castle user exists only after
    install.sh). Any line of output about the unit (unknown key, bad value) fails."""
    assert SYSTEMD_ANALYZE is not None
    command = castle_command()
    assert len(command) == 1, "no castle script in the venv"
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    group = subprocess.run(["id", "-gn"], capture_output=True, text=True, check=True).stdout.strip()
    with open(UNIT, encoding="utf-8") as handle:
        text = handle.read()
    changed = text.replace("ExecStart=/opt/castle/venv/bin/castle ", f"ExecStart={command[0]} ")
    changed = changed.replace("\nUser=castle\n", f"\nUser={user}\n").replace("\nGroup=castle\n", f"\nGroup={group}\n")
    assert changed.count("\n") == text.count("\n") and changed != text
    unit_dir = tmp_path / "units"
    (unit_dir / "castle.service.d").mkdir(parents=True)
    (unit_dir / "castle.service").write_text(changed)
    shutil.copy(ZOOKEEPER_DROP_IN, unit_dir / "castle.service.d" / "zookeeper.conf")
    result = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit_dir / "castle.service")], capture_output=True,
                            text=True, timeout=60)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, output
    about_us = [line for line in output.splitlines() if "castle" in line or "zookeeper.conf" in line]
    assert not about_us, output

    # The check is real: a misspelt directive is reported.
    (unit_dir / "castle.service").write_text(changed.replace("ProtectSystem=", "ProtectSystm="))
    result = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit_dir / "castle.service")], capture_output=True,
                            text=True, timeout=60)
    assert "ProtectSystm" in result.stdout + result.stderr


def test_install_script_is_valid_bash():
    script = os.path.join(DEPLOY, "install.sh")
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", script], check=True, timeout=30)


# ---------------------------------------------------------------------- (f) the example config
def test_every_setting_of_the_example_config_is_accepted():
    with open(PROPERTIES, encoding="utf-8") as handle:
        text = handle.read()
    active = read_properties(text)
    assert {"listeners", "log.dirs", "run.dir", "workers", "num.partitions", "log.retention.ms",
            "log.segment.bytes", "graceful.shutdown.timeout.ms", "log.level"} <= set(active)
    load_config(PROPERTIES)
    # The commented-out "#key=value" lines are settings at their defaults, or examples:
    # each must load as well once uncommented.
    commented = re.findall(r"(?m)^#([a-z][a-z0-9.]*)=(.*)$", text)
    assert len(commented) >= 30
    keys = {key for key, _value in commented}
    assert {"zookeeper.connect", "advertised.listeners", "worker.ring.bytes",
            "log.flush.interval.messages", "log.flush.interval.ms"} <= keys
    for key, value in commented:
        assert key in BY_NAME, f"{key} is not a Castle setting"
        load_config(PROPERTIES, {key: value})


def test_a_broker_starts_from_the_example_config(broker_factory, notify_socket):
    """castle serve deploy/castle.properties, with log.dirs, listeners and run.dir (and
    workers) moved to the test's own, exactly as systemd would start it."""
    broker = broker_factory(workers=2, start=False)
    notify = notify_socket()
    launch(broker, {"NOTIFY_SOCKET": notify.env_value}, config_file=PROPERTIES)
    notify.wait_for("READY", READY_TIMEOUT)
    broker.wait_ready()
    lines = last_start_log(broker)
    assert f"serve {PROPERTIES} --override" in lines[0]
    stop_and_expect_stopping(broker, notify)
