"""What TLS and SASL cost: one Castle broker, its four security listeners side by side in one run.

One broker (``--workers`` workers, a temporary log dir) listens on PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-512, the only mechanism enabled), all on
127.0.0.1. Its TLS certificate is made for this run with the ``cryptography`` package (a
CA and a server certificate for 127.0.0.1, RSA 2048 by default or ``--server-key ec``),
and its one user is written offline with ``castle users set --broker-config`` before it
starts, as an operator would. For each listener, on a topic of its own with the same
settings (``--partitions``, default one per worker; replication factor 1):

1. **Publish**: one confluent-kafka producer process (acks=1, linger.ms=5,
   batch.size=1,000,000, no compression, a 64 MiB local queue) sends ``--record-bytes``
   records as fast as it can, round robin over the partitions in bursts of 64, for
   ``--seconds`` (or exactly ``--records``); MiB/s and records/s from the first timed
   produce() to the last acknowledgement. One untimed record per partition goes first,
   so the client's connection to the leader (its TLS handshake and SASL login) is open
   before the clock starts: that cost is the handshake figure's, not the rate's.
2. **Consume**: one consumer process (assign() from the beginning, no group, as
   loadtest/runner/consumer.py otherwise; the leader's connection opened first by an
   untimed ListOffsets) reads all those records back; MiB/s from assign() to the last
   record.
3. **Handshake**: ``--connections`` new connections opened one after another by this
   process with raw sockets (Python's ssl module; SCRAM with scramp): TCP connect, TLS
   handshake (full, no session resumption, certificate verified as librdkafka does),
   SaslHandshake + two SaslAuthenticate round trips, then one ApiVersions round trip;
   ms per connection, p50 and p99, and each phase's p50. A few connections before the
   timed ones are not counted. The SCRAM client computes PBKDF2 on every connection (as
   librdkafka does): ``sasl_client`` is that part of the SASL phase, ``sasl_broker`` the
   rest (three round trips), and ``client_pbkdf2_ms`` the PBKDF2 alone. With TLS 1.3 the
   client's handshake ends when it has sent its Finished; the broker reads that Finished
   (and sends its session tickets) with the first request, so part of the broker's TLS
   work shows in the first round trip after the handshake: compare totals, not phases.

The broker's CPU (all its processes, from /proc, in clock ticks of 10 ms: take the per
connection figure from a few hundred connections) is taken around every measurement. An
unmeasured PLAINTEXT publish and consume (``--warmup`` s) precedes the first round. Listeners run in interleaved order, PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, and with
``--rounds 2`` again in reverse (then forward, ...), so drift on a shared machine does
not favour one; a listener's figure is the median of its rounds (handshake percentiles
over all its connections). Ratios are to PLAINTEXT; goals: SASL_PLAINTEXT publish and
consume >= 0.95, SSL publish >= 0.7 and consume >= 0.5 (SASL_SSL is reported, no goal).

Progress goes to stderr; stdout carries a table, or with ``--json`` one JSON document
(every figure, the goals, the command line, the machine and the date). The broker and
every client process are stopped by PID and the temporary directory removed. Run::

    python -m loadtest.bench_security --seconds 10 --workers 2 --connections 200
    python -m loadtest.bench_security --seconds 10 --rounds 2 --json > security.json

Client processes are this module too (``--child``, settings on stdin, so the SASL
password is not on a command line); they print JSON lines (loadtest/children.py).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import ipaddress
import json
import os
import random
import resource
import secrets
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from loadtest.brokers import PYTHON, OwnBroker, castle_command, free_port, wait_until
from loadtest.children import ChildProcess, emit
from loadtest.common import CLOCK_TICKS, MIB, info, proc_cpu_ticks, process_tree
from loadtest.machine import machine_info

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_LISTENERS = ("SSL", "SASL_SSL")
SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")
HOST = "127.0.0.1"
MECHANISM = "SCRAM-SHA-512"
USER = "bench"
CASTLE_DEFAULT_ITERATIONS = 8192  # castle users set's default (broker/admin/users.py; not importable here)
GOALS = {("SASL_PLAINTEXT", "publish"): 0.95, ("SASL_PLAINTEXT", "consume"): 0.95,
         ("SSL", "publish"): 0.7, ("SSL", "consume"): 0.5}
BURST = 64  # records produced between two polls, as loadtest/runner/producer.py
# The producer's local queue: 64 MiB (librdkafka's default is 1 GiB). Enough to keep every
# partition's 1 MB batches coming; small enough that sending stops about when --seconds
# is up instead of draining a GiB afterwards (the rate is taken to the last acknowledgement).
QUEUE_KIB = 64 * 1024
CONSUME_BATCH = 10_000
FLUSH_TIMEOUT_S = 60.0
STALL_S = 30.0  # a consumer that receives nothing this long gives up
WARMUP_CONNECTIONS = 5
# A new connection's phases; sasl = sasl_client (scramp computing here) + sasl_broker (the three round trips).
PHASES = ("connect", "tls", "sasl", "sasl_client", "sasl_broker", "api_versions")
CLIENT_ID = b"castle-bench-security"

# Kafka API keys and the versions the raw client speaks.
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


# --------------------------------------------------------------------------- certificates


def make_certificates(directory: str, key_type: str) -> tuple[str, str]:
    """A CA (ca.pem) and a server keystore (server.pem: leaf + CA certificates and the
    unencrypted PKCS#8 key, Kafka's PEM keystore form) valid for 127.0.0.1 and localhost.

    The ``cryptography`` package, not ``openssl`` subprocesses: it is one of Castle's own
    dependencies (so it is there wherever the broker is), needs no openssl binary nor
    per-version command-line flags, and writes exactly the PEM layout the broker reads.
    loadtest/ may not import tests/certs.py, hence these few lines of their own.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Castle bench CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .sign(ca_key, hashes.SHA256()))
    # RSA 2048 by default: what most Kafka deployments' certificates are, and the costlier
    # handshake of the two (an RSA signature per full handshake).
    server_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048) if key_type == "rsa"
        else ec.generate_private_key(ec.SECP256R1()))
    server_cert = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
                   .issuer_name(ca_name).public_key(server_key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                               x509.IPAddress(ipaddress.ip_address(HOST))]),
                                  critical=False)
                   .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_path, keystore = os.path.join(directory, "ca.pem"), os.path.join(directory, "server.pem")
    with open(ca_path, "wb") as handle:
        handle.write(ca_cert.public_bytes(pem))
    with open(os.open(keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
        handle.write(server_cert.public_bytes(pem) + ca_cert.public_bytes(pem)
                     + server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return ca_path, keystore


# --------------------------------------------------------------------------- client processes


def client_settings(listener: str, port: int, ca: str, password: str) -> dict[str, Any]:
    """librdkafka's settings for one listener."""
    settings: dict[str, Any] = {"bootstrap.servers": f"{HOST}:{port}", "security.protocol": listener}
    if listener in TLS_LISTENERS:
        settings["ssl.ca.location"] = ca
    if listener in SASL_LISTENERS:
        settings.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": password})
    return settings


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_produce(cfg: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    state: dict[str, Any] = {"acked": 0, "errors": 0, "first_error": None, "last_ack": 0.0}
    clock = time.perf_counter

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            state["errors"] += 1
            state["first_error"] = state["first_error"] or str(err)
            return
        state["acked"] += 1
        state["last_ack"] = clock()

    producer = Producer({**cfg["client"], "acks": "1", "linger.ms": 5, "batch.size": 1_000_000,
                         "compression.type": "none", "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": QUEUE_KIB, "on_delivery": on_delivery})
    topic, partitions, size = cfg["topic"], cfg["partitions"], cfg["record_bytes"]
    records: int | None = cfg.get("records")
    producer.list_topics(topic, timeout=30)
    value = bytes(random.Random(size).choices(range(65, 91), k=size))  # capital letters, as the runner's
    produce, poll = producer.produce, producer.poll
    # One record per partition first, not timed: librdkafka opens a connection of its own to
    # the leader (the bootstrap one is another), and its TLS handshake and SASL login
    # (PBKDF2: milliseconds) belong to the handshake figures, not to the rate.
    for p in range(partitions):
        produce(topic, value, partition=p)
    producer.flush(FLUSH_TIMEOUT_S)
    warmup_records, state["acked"] = state["acked"], 0
    sent = partition = 0
    cpu_at_start = _cpu_s()
    started = clock()
    end = started + float(cfg["seconds"])
    while (sent < records) if records is not None else (clock() < end):
        for _ in range(BURST if records is None else min(BURST, records - sent)):
            try:
                produce(topic, value, partition=partition)
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                poll(0.01)
                break
            sent += 1
        partition = (partition + 1) % partitions
        poll(0)
    unflushed = producer.flush(FLUSH_TIMEOUT_S)
    seconds = max(state["last_ack"] - started, 1e-9)
    emit(event="done", sent=sent, acked=state["acked"], warmup_records=warmup_records, bytes=state["acked"] * size,
         seconds=seconds,
         errors=state["errors"], first_error=state["first_error"], unflushed=unflushed,
         client_cpu_s=_cpu_s() - cpu_at_start)


def child_consume(cfg: dict[str, Any]) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**cfg["client"], "group.id": f"bench-security-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         # As loadtest/runner/consumer.py: librdkafka's default 1 s pause once its
                         # queue is full would hold a fast reader back, whatever the broker.
                         "fetch.queue.backoff.ms": 10})
    topic, expected = cfg["topic"], int(cfg["records"])
    consumer.list_topics(topic, timeout=30)
    # Not timed, as for the producer: a ListOffsets opens the connection to the leader.
    consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    clock = time.perf_counter
    got = nbytes = errors = 0
    first_error: str | None = None
    cpu_at_start = _cpu_s()
    started = last = clock()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(cfg["partitions"])])
    while got < expected:
        # What is already fetched, else wait up to 100 ms for one: consume(n, t) would wait
        # the whole t for n records and add it to the last batch's time.
        messages = consumer.consume(CONSUME_BATCH, 0)
        if not messages:
            one = consumer.poll(0.1)
            messages = [one] if one is not None else []
        now = clock()
        if not messages:
            if now - last > STALL_S:
                break
            continue
        good = [m for m in messages if m.error() is None]
        if len(good) != len(messages):
            for m in messages:
                if m.error() is not None:
                    errors += 1
                    first_error = first_error or str(m.error())
        got += len(good)
        nbytes += sum(map(len, good))
        if good:
            last = now
    cpu = _cpu_s() - cpu_at_start
    consumer.close()
    emit(event="done", records=got, expected=expected, bytes=nbytes, seconds=max(last - started, 1e-9),
         errors=errors, first_error=first_error, client_cpu_s=cpu)


def child_main() -> int:
    """A client process: its settings as one JSON line on stdin."""
    cfg = json.loads(sys.stdin.readline())
    if cfg["role"] == "produce":
        child_produce(cfg)
    else:
        child_consume(cfg)
    return 0


def run_child(cfg: dict[str, Any], name: str, log_dir: str, timeout: float) -> dict[str, Any]:
    """One client process to its end; its "done" line. Stopped by PID whatever happens."""
    child = ChildProcess([PYTHON, "-m", "loadtest.bench_security", "--child"], name, log_dir, stdin=True)
    try:
        child.send(json.dumps(cfg) + "\n")
        try:
            child.process.wait(timeout)
        except subprocess.TimeoutExpired:
            info(f"WARNING: {name} (pid {child.pid}) still running after {timeout:.0f} s; stopping it")
    finally:
        code = child.stop(timeout=10)
    done = child.snapshot("done")
    if not done:
        raise SystemExit(f"{name} reported no result (exit code {code}); its stderr ends:\n{child.stderr_tail()}")
    return done[-1]


# --------------------------------------------------------------------------- the raw handshake client


def _request(api_key: int, version: int, correlation: int, body: bytes, flexible: bool = False) -> bytes:
    """A size-prefixed request: header v1 (v2 when flexible: an empty tag buffer after client_id)."""
    header = struct.pack(">hhih", api_key, version, correlation, len(CLIENT_ID)) + CLIENT_ID
    if flexible:
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _round_trip(sock: socket.socket, request: bytes, correlation: int) -> bytes:
    """Send one request, read its response; the body after the correlation id (response header v0)."""
    sock.sendall(request)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    frame = _recv_exact(sock, size)
    if struct.unpack_from(">i", frame)[0] != correlation:
        raise ConnectionError("response to another request")
    return frame[4:]


def _api_versions(sock: socket.socket, correlation: int) -> None:
    # v3, as librdkafka sends it: flexible, client software name and version as compact strings.
    name, version = b"castle-bench", b"1"
    body = bytes([len(name) + 1]) + name + bytes([len(version) + 1]) + version + b"\x00"
    answer = _round_trip(sock, _request(API_VERSIONS, 3, correlation, body, flexible=True), correlation)
    (error,) = struct.unpack_from(">h", answer)
    if error:
        raise ConnectionError(f"ApiVersions error {error}")


def _sasl_authenticate(sock: socket.socket, token: bytes, correlation: int) -> bytes:
    answer = _round_trip(sock, _request(SASL_AUTHENTICATE, 1, correlation, struct.pack(">i", len(token)) + token),
                         correlation)
    error, message_len = struct.unpack_from(">hh", answer)
    at = 4 + max(message_len, 0)
    if error:
        message = answer[4:at].decode(errors="replace") if message_len > 0 else ""
        raise ConnectionError(f"SaslAuthenticate error {error}: {message}")
    (token_len,) = struct.unpack_from(">i", answer, at)
    return answer[at + 4:at + 4 + token_len]


def _scram(sock: socket.socket, password: str) -> float:
    """SaslHandshake v1 then SCRAM in two SaslAuthenticate v1 round trips; the server's proof checked.
    Returns the seconds spent computing on this side (scramp: PBKDF2 and the proofs)."""
    from scramp import ScramClient

    clock = time.perf_counter
    mechanism = MECHANISM.encode()
    answer = _round_trip(sock, _request(SASL_HANDSHAKE, 1, 2, struct.pack(">h", len(mechanism)) + mechanism), 2)
    (error,) = struct.unpack_from(">h", answer)
    if error:
        raise ConnectionError(f"SaslHandshake error {error}")
    t0 = clock()
    client = ScramClient([MECHANISM], USER, password)
    first = client.get_client_first().encode()
    own = clock() - t0
    server_first = _sasl_authenticate(sock, first, 3)
    t0 = clock()
    client.set_server_first(server_first.decode())  # PBKDF2 with the user's salt and iterations
    final = client.get_client_final().encode()
    own += clock() - t0
    server_final = _sasl_authenticate(sock, final, 4)
    t0 = clock()
    client.set_server_final(server_final.decode())  # raises if the server's signature is wrong
    return own + clock() - t0


def one_connection(listener: str, port: int, context: ssl.SSLContext | None, password: str) -> dict[str, Any]:
    """Seconds of each phase of one new connection: connect, tls, sasl, api_versions."""
    clock = time.perf_counter
    t0 = clock()
    sock = socket.create_connection((HOST, port), timeout=10)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t1 = clock()
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname=HOST)  # the whole handshake happens here
        t2 = clock()
        sasl_client = _scram(sock, password) if listener in SASL_LISTENERS else 0.0
        t3 = clock()
        _api_versions(sock, 1)
        t4 = clock()
        tls = (sock.version(), (sock.cipher() or ("",))[0]) if isinstance(sock, ssl.SSLSocket) else (None, None)
    finally:
        sock.close()
    sasl = t3 - t2 if listener in SASL_LISTENERS else 0.0  # a phase that does not apply is 0, not a clock read's cost
    return {"connect": t1 - t0, "tls": t2 - t1 if context is not None else 0.0, "sasl": sasl, "sasl_client": sasl_client,
            "sasl_broker": sasl - sasl_client, "api_versions": t4 - t3, "total": t4 - t0,
            "tls_version": tls[0], "cipher": tls[1]}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered))) - 1))]


def handshakes(listener: str, port: int, context: ssl.SSLContext | None, password: str, count: int,
               broker_pid: int) -> dict[str, Any]:
    """``count`` connections one after another (after a few not counted)."""
    for _ in range(WARMUP_CONNECTIONS):
        one_connection(listener, port, context, password)
    ticks = broker_ticks(broker_pid)
    timed = [one_connection(listener, port, context, password) for _ in range(count)]
    ticks = broker_ticks(broker_pid) - ticks
    return {"connections": timed, "broker_cpu_s": ticks / CLOCK_TICKS}


def client_pbkdf2_ms(iterations: int, repeat: int = 5) -> float:
    """What the SCRAM client's PBKDF2 (HMAC-SHA-512, the user's iterations) costs here, median ms."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        hashlib.pbkdf2_hmac("sha512", b"password", secrets.token_bytes(16), iterations)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 3)


# --------------------------------------------------------------------------- broker


def broker_ticks(root: int) -> int:
    """CPU ticks of the broker's processes (supervisor, workers, coordinator)."""
    total = 0
    for pid in process_tree(root):
        try:
            total += proc_cpu_ticks(pid)
        except (OSError, ValueError):
            pass  # exited meanwhile
    return total


def distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def set_user(config_file: str, password: str, iterations: int) -> None:
    """The benchmark's SCRAM user, written into the log dir before the broker starts."""
    done = subprocess.run(castle_command() + ["users", "set", USER, "--password-stdin", "--mechanism", MECHANISM,
                                              "--iterations", str(iterations), "--broker-config", config_file],
                          input=password + "\n", capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"castle users set exited with {done.returncode}: {done.stderr.strip()}")


def create_topic(admin: Any, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(60)

    def led() -> bool:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        return (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values()))

    wait_until(led, 60, f"topic {name}: every partition led", interval=0.1)


def delete_topic(admin: Any, name: str) -> None:
    try:
        admin.delete_topics([name], operation_timeout=30)[name].result(60)
    except Exception as exc:  # noqa: BLE001 - the figures are taken; the temp dir goes anyway
        info(f"WARNING: could not delete topic {name}: {exc}")


# --------------------------------------------------------------------------- one listener, one round


def measure_listener(listener: str, round_no: int, ctx: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    broker: OwnBroker = ctx["broker"]
    port = ctx["ports"][listener]
    topic = f"bench-sec-{listener.lower().replace('_', '-')}-r{round_no}-{ctx['run']}"
    create_topic(ctx["admin"], topic, args.partitions)
    client = client_settings(listener, port, ctx["ca"], ctx["password"])
    base = {"client": client, "topic": topic, "partitions": args.partitions}
    run_limit = (args.seconds if args.records is None else 0) + 120 + FLUSH_TIMEOUT_S

    ticks = broker_ticks(broker.pid)
    pub = run_child({**base, "role": "produce", "record_bytes": args.record_bytes, "seconds": args.seconds,
                     "records": args.records}, f"produce-{listener}-r{round_no}", ctx["logs"], run_limit)
    pub_cpu = (broker_ticks(broker.pid) - ticks) / CLOCK_TICKS
    if pub["errors"] or pub["unflushed"] or not pub["acked"]:
        raise SystemExit(f"{listener}: publish failed: {pub['acked']} acked, {pub['errors']} errors "
                         f"(first: {pub['first_error']}), {pub['unflushed']} unflushed")
    ticks = broker_ticks(broker.pid)
    total = pub["acked"] + pub["warmup_records"]
    con = run_child({**base, "role": "consume", "records": total}, f"consume-{listener}-r{round_no}",
                    ctx["logs"], pub["seconds"] * 10 + 120 + STALL_S)
    con_cpu = (broker_ticks(broker.pid) - ticks) / CLOCK_TICKS
    if con["records"] < total or con["errors"]:
        raise SystemExit(f"{listener}: consumed {con['records']} of {total} records, {con['errors']} errors "
                         f"(first: {con['first_error']})")
    delete_topic(ctx["admin"], topic)

    hs = handshakes(listener, port, ctx["tls"] if listener in TLS_LISTENERS else None, ctx["password"],
                    args.connections, broker.pid)
    mib = pub["bytes"] / MIB
    result = {
        "round": round_no,
        "publish": {"mib_per_s": round(mib / pub["seconds"], 2), "records_per_s": round(pub["acked"] / pub["seconds"]),
                    "records": pub["acked"], "bytes": pub["bytes"], "seconds": round(pub["seconds"], 3),
                    "broker_cpu_s": round(pub_cpu, 2), "client_cpu_s": round(pub["client_cpu_s"], 2)},
        "consume": {"mib_per_s": round(con["bytes"] / MIB / con["seconds"], 2),
                    "records_per_s": round(con["records"] / con["seconds"]), "records": con["records"], "bytes": con["bytes"],
                    "seconds": round(con["seconds"], 3), "broker_cpu_s": round(con_cpu, 2),
                    "client_cpu_s": round(con["client_cpu_s"], 2)},
        "handshake_connections": hs["connections"],
        "handshake_broker_cpu_s": hs["broker_cpu_s"],
    }
    h = [c["total"] for c in hs["connections"]]
    info(f"round {round_no + 1} {listener:<14}: publish {result['publish']['mib_per_s']:8.1f} MiB/s "
         f"{result['publish']['records_per_s']:>9,} rec/s; consume {result['consume']['mib_per_s']:8.1f} MiB/s; "
         f"handshake p50 {percentile(h, 0.5) * 1000:.2f} ms p99 {percentile(h, 0.99) * 1000:.2f} ms")
    return result


def warm_up(ctx: dict[str, Any], args: argparse.Namespace) -> None:
    """An unmeasured publish and consume on PLAINTEXT, so the first listener timed does not
    pay for the broker's first topic, first segment files and cold caches."""
    topic = f"bench-sec-warmup-{ctx['run']}"
    create_topic(ctx["admin"], topic, args.partitions)
    base = {"client": client_settings("PLAINTEXT", ctx["ports"]["PLAINTEXT"], ctx["ca"], ctx["password"]),
            "topic": topic, "partitions": args.partitions}
    pub = run_child({**base, "role": "produce", "record_bytes": args.record_bytes, "seconds": args.warmup, "records": None},
                    "produce-warmup", ctx["logs"], args.warmup + 120 + FLUSH_TIMEOUT_S)
    run_child({**base, "role": "consume", "records": pub["acked"] + pub["warmup_records"]}, "consume-warmup", ctx["logs"],
              args.warmup * 10 + 120 + STALL_S)
    delete_topic(ctx["admin"], topic)
    info(f"warm-up: {pub['acked']:,} records on PLAINTEXT, not counted")


# --------------------------------------------------------------------------- figures


def summarize(listener: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """A listener's figures over its rounds: medians of the rates, percentiles over all connections."""
    out: dict[str, Any] = {}
    for what in ("publish", "consume"):
        rows = [r[what] for r in rounds]
        out[what] = {key: round(statistics.median(row[key] for row in rows), 3)
                     for key in ("mib_per_s", "records_per_s", "seconds", "broker_cpu_s", "client_cpu_s")}
        out[what]["records"] = sum(row["records"] for row in rows)
        gib = sum(row["bytes"] for row in rows) / (1024 * MIB)
        out[what]["broker_cpu_s_per_gib"] = round(sum(row["broker_cpu_s"] for row in rows) / gib, 2)
        out[what]["rounds"] = [{"round": r["round"] + 1, **{k: r[what][k] for k in ("mib_per_s", "seconds", "broker_cpu_s")}}
                               for r in rounds]
    conns = [c for r in rounds for c in r["handshake_connections"]]
    totals = [c["total"] for c in conns]
    hs: dict[str, Any] = {"connections": len(conns),
                          "p50_ms": round(percentile(totals, 0.50) * 1000, 3),
                          "p99_ms": round(percentile(totals, 0.99) * 1000, 3),
                          "mean_ms": round(statistics.fmean(totals) * 1000, 3),
                          "max_ms": round(max(totals) * 1000, 3),
                          "phases_p50_ms": {phase: round(percentile([c[phase] for c in conns], 0.5) * 1000, 3)
                                            for phase in PHASES},
                          "broker_cpu_ms_per_connection": round(
                              sum(r["handshake_broker_cpu_s"] for r in rounds) * 1000 / max(len(conns), 1), 3)}
    if listener in TLS_LISTENERS:
        hs["tls_version"], hs["cipher"] = conns[0]["tls_version"], conns[0]["cipher"]
    out["handshake"] = hs
    return out


def ratios_and_goals(listeners: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    base = listeners["PLAINTEXT"]
    ratios: dict[str, Any] = {}
    for name in LISTENERS[1:]:
        ratios[name] = {what: round(listeners[name][what]["mib_per_s"] / base[what]["mib_per_s"], 3)
                        for what in ("publish", "consume")}
        ratios[name]["handshake_p50"] = round(listeners[name]["handshake"]["p50_ms"] / base["handshake"]["p50_ms"], 2)
    goals = {f"{name.lower()}_{what}": {"value": ratios[name][what], "goal": f">= {minimum}",
                                        "met": ratios[name][what] >= minimum}
             for (name, what), minimum in GOALS.items()}
    return ratios, goals


def print_table(result: dict[str, Any]) -> None:
    s = result["settings"]
    amount = f"{s['records']:,} records" if s["records"] is not None else f"{s['seconds']} s"
    print(f"Castle security listeners: 1 broker, {s['workers']} worker(s), {s['partitions']} partition(s) per topic, "
          f"{amount} of {s['record_bytes']} B records per publish, {s['rounds']} round(s), "
          f"{s['connections']} connections per handshake case ({s['server_key']} server key, {MECHANISM}, "
          f"{s['scram_iterations']} iterations)")
    print()
    print(f"{'listener':<15} {'publish MiB/s':>13} {'rec/s':>10} {'ratio':>6} {'consume MiB/s':>14} {'ratio':>6} "
          f"{'handshake p50':>14} {'p99 ms':>8}  phases p50 ms: connect / tls / sasl (broker + client) / api")
    for name in LISTENERS:
        row, ratio = result["listeners"][name], result["ratios"].get(name, {"publish": 1.0, "consume": 1.0})
        hs, ph = row["handshake"], row["handshake"]["phases_p50_ms"]
        print(f"{name:<15} {row['publish']['mib_per_s']:>13.1f} {row['publish']['records_per_s']:>10,.0f} "
              f"{ratio['publish']:>5.2f}x {row['consume']['mib_per_s']:>14.1f} {ratio['consume']:>5.2f}x "
              f"{hs['p50_ms']:>14.2f} {hs['p99_ms']:>8.2f}  "
              f"{ph['connect']:.2f} / {ph['tls']:.2f} / {ph['sasl_broker']:.2f} + {ph['sasl_client']:.2f} / "
              f"{ph['api_versions']:.2f}")
    print()
    print("broker CPU s per GiB (publish / consume): " + ", ".join(
        f"{n} {result['listeners'][n]['publish']['broker_cpu_s_per_gib']}/{result['listeners'][n]['consume']['broker_cpu_s_per_gib']}"
        for n in LISTENERS))
    print("broker CPU ms per new connection: " + ", ".join(
        f"{n} {result['listeners'][n]['handshake']['broker_cpu_ms_per_connection']}" for n in LISTENERS)
          + f"; client PBKDF2 per SCRAM login {result['client_pbkdf2_ms']} ms")
    print()
    for name, goal in result["goals"].items():
        print(f"goal {name}: {goal['value']} ({goal['goal']}): {'met' if goal['met'] else 'NOT MET'}")
    sasl_ssl = result["ratios"]["SASL_SSL"]
    print(f"SASL_SSL (no goal): publish {sasl_ssl['publish']}, consume {sasl_ssl['consume']}")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_security", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds each producer sends (default 10)")
    parser.add_argument("--records", type=int, default=None, help="send exactly this many records instead of --seconds")
    parser.add_argument("--record-bytes", type=int, default=1024, help="record size (default 1024)")
    parser.add_argument("--workers", type=int, default=2, help="the broker's workers (default 2)")
    parser.add_argument("--partitions", type=int, default=None, help="partitions per topic (default: --workers)")
    parser.add_argument("--connections", type=int, default=200, help="timed new connections per listener (default 200)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over the four listeners, alternating order")
    parser.add_argument("--server-key", choices=("rsa", "ec"), default="rsa",
                        help="the broker certificate's key: RSA 2048 (default) or EC P-256")
    parser.add_argument("--scram-iterations", type=int, default=CASTLE_DEFAULT_ITERATIONS,
                        help=f"PBKDF2 iterations of the user's SCRAM credential (default {CASTLE_DEFAULT_ITERATIONS}, "
                             "castle users set's)")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds of an unmeasured PLAINTEXT publish and consume before the first round (default 2; 0: none)")
    parser.add_argument("--dir", default=None, help="where the temporary broker directory goes (default: $TMPDIR)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout instead of the table")
    args = parser.parse_args(argv)
    if args.partitions is None:
        args.partitions = args.workers
    for name in ("record_bytes", "workers", "partitions", "connections", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.records is not None and args.records < 1:
        parser.error("--records must be at least 1")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main()
    args = parse_args(argv)
    from confluent_kafka.admin import AdminClient

    command = [PYTHON, "-m", "loadtest.bench_security", *argv]
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    base = tempfile.mkdtemp(prefix="castle-bench-sec-", dir=args.dir)
    password = secrets.token_urlsafe(18)
    broker: OwnBroker | None = None
    ctx: dict[str, Any] = {}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in LISTENERS}
    try:
        pki, broker_dir, logs = (os.path.join(base, d) for d in ("pki", "broker", "clients"))
        for directory in (pki, broker_dir, logs):
            os.makedirs(directory)
        info(f"certificates ({args.server_key} server key) ...")
        ca, keystore = make_certificates(pki, args.server_key)
        ports = dict(zip(LISTENERS, distinct_free_ports(len(LISTENERS))))
        settings = {"listeners": ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items()),
                    "ssl.keystore.location": keystore, "sasl.enabled.mechanisms": MECHANISM,
                    "log.dirs": os.path.join(broker_dir, "data"), "workers": str(args.workers)}
        config_file = os.path.join(base, "server.properties")
        with open(config_file, "w") as handle:
            handle.write("".join(f"{key}={value}\n" for key, value in settings.items()))
        set_user(config_file, password, args.scram_iterations)
        broker = OwnBroker(broker_dir, settings)
        # OwnBroker picked a PLAINTEXT port of its own; ours (in the listeners) is the one it checks.
        broker.port, broker.bootstrap = ports["PLAINTEXT"], f"{HOST}:{ports['PLAINTEXT']}"
        broker.wait_ready(60)
        tls = ssl.create_default_context(cafile=ca)
        for name in LISTENERS:  # every listener answers, and the user authenticates, before anything is timed
            wait_until(lambda: _probe(name, ports[name], tls, password), 30, f"listener {name} on port {ports[name]}",
                       interval=0.2)
        info(f"broker up (pid {broker.pid}): " + ", ".join(f"{n} {p}" for n, p in ports.items()))
        ctx.update(broker=broker, ports=ports, ca=ca, password=password, tls=tls, logs=logs,
                   admin=AdminClient({"bootstrap.servers": broker.bootstrap}), run=uuid.uuid4().hex[:6])
        if args.warmup > 0:
            warm_up(ctx, args)
        for round_no in range(args.rounds):
            order = LISTENERS if round_no % 2 == 0 else LISTENERS[::-1]
            for name in order:
                rounds[name].append(measure_listener(name, round_no, ctx, args))
    finally:
        ctx.clear()  # the AdminClient goes before the broker (else librdkafka logs the disconnection)
        if broker is not None:
            code = broker.stop(timeout=30)
            if code not in (0, None, -signal.SIGTERM):
                info(f"broker pid {broker.pid} exited with {code}; its stderr ends:\n{broker.stderr_tail(10)}")
        shutil.rmtree(base, ignore_errors=True)

    listeners = {name: summarize(name, rounds[name]) for name in LISTENERS}
    ratios, goals = ratios_and_goals(listeners)
    machine = machine_info()
    result: dict[str, Any] = {
        "command": command,
        "date": started_at,
        "machine": {"cores": machine["nproc"], "cpu_model": machine["cpu_model"], **machine},
        "settings": {"seconds": args.seconds if args.records is None else None, "records": args.records,
                     "record_bytes": args.record_bytes, "workers": args.workers, "partitions": args.partitions,
                     "warmup_s": args.warmup, "connections": args.connections, "warmup_connections": WARMUP_CONNECTIONS, "rounds": args.rounds,
                     "order": [list(LISTENERS if r % 2 == 0 else LISTENERS[::-1]) for r in range(args.rounds)],
                     "server_key": "RSA 2048" if args.server_key == "rsa" else "EC P-256",
                     "sasl_mechanism": MECHANISM, "scram_iterations": args.scram_iterations,
                     "producer": {"acks": "1", "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
                                  "queue.buffering.max.kbytes": QUEUE_KIB}},
        "client_pbkdf2_ms": client_pbkdf2_ms(args.scram_iterations),
        "listeners": listeners,
        "ratios": ratios,
        "handshake_ms": {name: {"p50": listeners[name]["handshake"]["p50_ms"], "p99": listeners[name]["handshake"]["p99_ms"]}
                         for name in LISTENERS},
        "goals": goals,
    }
    if args.json:
        json.dump(result, sys.stdout)
        print()
    else:
        print_table(result)
    return 0


def _probe(listener: str, port: int, tls: ssl.SSLContext, password: str) -> bool:
    try:
        one_connection(listener, port, tls if listener in TLS_LISTENERS else None, password)
        return True
    except (OSError, ConnectionError) as exc:
        info(f"  {listener} not ready: {exc}")
        return False


if __name__ == "__main__":
    sys.exit(main())
