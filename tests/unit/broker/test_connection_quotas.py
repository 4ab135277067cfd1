"""broker/quotas/connection_counts.py and broker/network/connection_quotas.py: the broker's open
connections counted across forked workers, and Kafka's ConnectionQuotas decisions on them."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from typing import Any, Callable, Iterator

import pytest

from broker.config import ConfigError, load_config
from broker.dynamic_configs import InvalidBrokerConfig, listener_setting, validate
from broker.network.connection_quotas import ADMITTED, REFUSED, WAIT, ConnectionQuotas, normal_address, parse_overrides
from broker.quotas import connection_counts
from broker.quotas.connection_counts import CREATED, AdmissionLock, ConnectionCounts, address_hash
from coordination.client_quotas import CONNECTION_CREATION_RATE, IP, LocalQuotas, entity

T0 = 1_800_000_000_000  # ms, on a window boundary


def wait_until(condition: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def quotas_of(tmp_path: Any) -> Iterator[Callable[..., ConnectionQuotas]]:
    made: list[ConnectionQuotas] = []

    def make(workers: int = 1, **settings: Any) -> ConnectionQuotas:
        overrides = {"listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": str(tmp_path / "data")}
        overrides.update({key.replace("_", "."): str(value) for key, value in settings.items()})
        config = load_config(None, overrides)
        counts, rates = connection_counts.inherited(0, workers, config.get_int("quota.window.num"),
                                                    config.get_int("quota.window.size.seconds") * 1000)
        quotas = ConnectionQuotas(counts, rates, AdmissionLock(str(tmp_path / f"lock{len(made)}")),
                                  config.listeners.bound, config.listeners.inter_broker)
        quotas.configure(config)
        made.append(quotas)
        return quotas

    yield make
    for quotas in made:
        quotas.close()


# ---------------------------------------------------------------------------- shared counts
def test_counts_are_summed_over_forked_workers_and_a_new_worker_starts_from_nothing() -> None:
    counts, _rates = connection_counts.prepare(2, 11, 1000)
    counts.bind(0)
    ours = address_hash("10.0.0.1")
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # worker 1: three connections from the address, then one closes on request
        code = 1
        try:
            counts.bind(1)
            for _ in range(3):
                counts.opened(0, ours)
            os.write(ready_w, b"1")
            os.read(go_r, 1)
            counts.closed(0, ours)
            os.write(ready_w, b"2")
            os.read(go_r, 1)
            code = 0
        finally:
            os._exit(code)
    try:
        assert os.read(ready_r, 1) == b"1"
        counts.opened(0, ours)
        counts.opened(0, ours)
        counts.opened(0, address_hash("10.0.0.2"))
        assert counts.address(ours) == 5
        assert counts.address(address_hash("10.0.0.2")) == 1
        assert counts.total() == 6 and counts.listener(0) == 6 and counts.listener(1) == 0
        os.write(go_w, b"x")
        assert os.read(ready_r, 1) == b"2"
        assert counts.address(ours) == 4 and counts.total() == 5
        os.write(go_w, b"x")
        assert os.waitpid(pid, 0)[1] == 0
        # Worker 1 died; its successor's table starts empty (its connections died with it).
        counts.bind(1)
        assert counts.address(ours) == 2 and counts.total() == 3
    finally:
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
        counts.close()
        connection_counts._prepared = None


def test_slots_of_addresses_with_no_connection_left_are_taken_again() -> None:
    counts = ConnectionCounts(1)
    counts.bind(0)
    for n in range(40_000):  # more addresses than slots, one connection each, in turn
        hashed = address_hash(f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}")
        counts.opened(0, hashed)
        counts.closed(0, hashed)
    last = address_hash("192.168.0.1")
    counts.opened(0, last)
    counts.opened(0, last)
    assert counts.address(last) == 2 and counts.total() == 2
    counts.close()


def test_the_admission_lock_excludes_other_processes_and_dies_with_its_holder(tmp_path: Any) -> None:
    path = str(tmp_path / "connections.lock")
    held_r, held_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            lock = AdmissionLock(path)
            lock.__enter__()
            os.write(held_w, b"1")
            time.sleep(30)
        finally:
            os._exit(0)
    probe = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        assert os.read(held_r, 1) == b"1"
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the kernel let go of the dead worker's lock
        fcntl.flock(probe, fcntl.LOCK_UN)
        with AdmissionLock(path):
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)
        os.close(held_r)
        os.close(held_w)


# ---------------------------------------------------------------------------- decisions
def test_max_connections_per_ip_refuses_the_next_and_a_close_frees_one(quotas_of: Callable[..., ConnectionQuotas]) -> None:
    quotas = quotas_of(max_connections_per_ip=2)
    assert [quotas.admit(0, "10.0.0.1") for _ in range(3)] == [ADMITTED, ADMITTED, REFUSED]
    assert quotas.admit(0, "10.0.0.2") == ADMITTED  # another address, its own count
    quotas.closed(0, "10.0.0.1")
    assert quotas.admit(0, "10.0.0.1") == ADMITTED
    assert quotas.counts.total() == 3


def test_overrides_set_other_maxima_per_address_and_host_name(quotas_of: Callable[..., ConnectionQuotas]) -> None:
    assert parse_overrides("127.0.0.1:4, ::1:3,host-a:0") == {"127.0.0.1": 4, "::1": 3, "host-a": 0}
    assert normal_address("::ffff:10.1.2.3") == "10.1.2.3" and normal_address("[::1]") == "::1"
    quotas = quotas_of(max_connections_per_ip=0, max_connections_per_ip_overrides="10.0.0.1:3,localhost:1")
    assert [quotas.admit(0, "10.0.0.1") for _ in range(4)] == [ADMITTED] * 3 + [REFUSED]
    assert quotas.admit(0, "10.0.0.2") == REFUSED  # 0 for everyone else
    wait_until(lambda: quotas.max_for("127.0.0.1") == 1 or quotas.max_for("::1") == 1, "localhost to resolve")


def test_bad_limits_are_refused_in_the_file_and_as_dynamic_configs() -> None:
    for key, bad in (("max.connections.per.ip.overrides", "127.0.0.1"), ("max.connections.per.ip.overrides", "a:b"),
                     ("max.connections.per.ip.overrides", "10.0.0.1:-1"), ("max.connections.per.ip.overrides", "a b:1"),
                     ("max.connections", "-1"), ("max.connection.creation.rate", "x"), ("max.connections.per.ip", "-5")):
        with pytest.raises(ConfigError):
            load_config(None, {key: bad})
        with pytest.raises(InvalidBrokerConfig) as refused:
            validate({"max.connections.per.ip": "7", key: bad})
        assert not refused.value.unknown
    good = {"max.connections": "10", "max.connections.per.ip": "0", "max.connection.creation.rate": "5",
            "max.connections.per.ip.overrides": "127.0.0.1:200,host.example:100"}
    assert validate(good) == good
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        load_config(None, {"max.connections.per.ip": "0"})
    with pytest.raises(InvalidBrokerConfig, match="can be set to zero only if"):
        validate({"max.connections.per.ip": "0"})


def test_max_connections_waits_for_a_slot_except_on_the_protected_inter_broker_listener(
        quotas_of: Callable[..., ConnectionQuotas]) -> None:
    quotas = quotas_of(listeners="PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
                       listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                       inter_broker_listener_name="INTERNAL", max_connections=2)
    plaintext, internal = 0, 1
    assert [quotas.admit(plaintext, "10.0.0.1") for _ in range(3)] == [ADMITTED, ADMITTED, WAIT]
    assert quotas.admit(internal, "10.0.0.9") == ADMITTED  # over the broker's bound, as Kafka lets it
    assert quotas.admit(internal, "10.0.0.9") == ADMITTED
    assert quotas.counts.total() == 4
    quotas.closed(plaintext, "10.0.0.1")
    assert quotas.admit(plaintext, "10.0.0.1") == WAIT  # still 3 of 2
    quotas.closed(internal, "10.0.0.9")
    quotas.closed(internal, "10.0.0.9")
    assert quotas.admit(plaintext, "10.0.0.1") == ADMITTED


def test_a_listener_limit_holds_its_listener_only(quotas_of: Callable[..., ConnectionQuotas]) -> None:
    quotas = quotas_of(listeners="PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
                       listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                       inter_broker_listener_name="INTERNAL", **{"listener.name.internal.max.connections": 1})
    assert [quotas.admit(1, "10.0.0.9") for _ in range(2)] == [ADMITTED, WAIT]
    assert [quotas.admit(0, "10.0.0.1") for _ in range(5)] == [ADMITTED] * 5


def test_the_broker_creation_rate_delays_by_kafkas_throttle_time_bounded_by_a_window(
        quotas_of: Callable[..., ConnectionQuotas]) -> None:
    quotas = quotas_of(max_connection_creation_rate=5)  # 11 samples of 1 s: a rate over 10 s at first
    assert all(quotas.creation_delay_ms(0, T0) == 0 for _ in range(50))
    assert quotas.creation_delay_ms(0, T0) == round((51 / 10 - 5) / 5 * 10_000)
    for _ in range(100):
        delay = quotas.creation_delay_ms(0, T0)
    assert delay == 1000  # Kafka bounds it by quota.window.size.seconds


def test_an_ip_creation_rate_throttles_that_address_only_and_takes_the_connection_back(
        tmp_path: Any, quotas_of: Callable[..., ConnectionQuotas]) -> None:
    store = LocalQuotas(str(tmp_path))
    store.alter(entity([(IP, "10.0.0.1")]), {CONNECTION_CREATION_RATE: 5})
    quotas = quotas_of(quota_window_num=2, max_connection_creation_rate=1000)
    quotas.follow_ip_quotas(store)
    assert quotas.ip_rate("10.0.0.1") == 5 and quotas.ip_rate("10.0.0.2") == 2**31 - 1

    def accept(address: str, now_ms: int) -> int:  # the acceptor's two steps
        assert quotas.creation_delay_ms(0, now_ms) == 0
        return quotas.admit(0, address, now_ms)

    answers = [accept("10.0.0.1", T0) for _ in range(8)]
    assert answers[:5] == [ADMITTED] * 5
    assert answers[5:] == [200, 200, 200]  # (6/s - 5/s) / 5/s * 1 s, each taken back so none counts
    assert quotas.counts.address(address_hash("10.0.0.1")) == 5
    assert [accept("10.0.0.2", T0) for _ in range(20)] == [ADMITTED] * 20
    assert quotas.rates.measure("broker", CREATED, T0)[0] == 25  # the throttled ones are out of the broker's rate too
    # The default ip quota holds every address without its own.
    store.alter(entity([(IP, None)]), {CONNECTION_CREATION_RATE: 1})
    wait_until(lambda: quotas.ip_rate("10.0.0.3") == 1, "the default ip quota to be followed")
    assert accept("10.0.0.3", T0) == ADMITTED
    assert accept("10.0.0.3", T0) > 0
    store.close()


def test_listener_limits_are_dynamic_with_kafkas_prefix_and_win_over_the_broker_value(
        quotas_of: Callable[..., ConnectionQuotas]) -> None:
    assert listener_setting("listener.name.internal.max.connections") == "max.connections"
    assert listener_setting("listener.name.internal.max.connection.creation.rate") == "max.connection.creation.rate"
    assert listener_setting("listener.name.internal.ssl.keystore.location") is None
    good = {"listener.name.internal.max.connections": "3", "listener.name.plaintext.max.connection.creation.rate": "9"}
    assert validate(good) == good
    with pytest.raises(InvalidBrokerConfig) as refused:
        validate({"listener.name.internal.max.connections": "-3"})
    assert not refused.value.unknown
    with pytest.raises(InvalidBrokerConfig) as refused:
        validate({"listener.name.internal.max.connections.typo": "3"})
    assert refused.value.unknown

    quotas = quotas_of(max_connections=10, **{"listener.name.plaintext.max.connections": 4})
    assert quotas.limits.listener_total == (4,)  # the file's listener value over the broker's
    config = load_config(None, {"max.connections": "10", "listener.name.plaintext.max.connections": "4"})
    quotas.configure(config, {"listener.name.plaintext.max.connections": 2})
    assert quotas.limits.listener_total == (2,) and quotas.limits.total == 10  # run time over the file
    assert [quotas.admit(0, "10.0.0.1") for _ in range(3)] == [ADMITTED, ADMITTED, WAIT]
    quotas.configure(config, {})
    assert quotas.admit(0, "10.0.0.1") == ADMITTED
