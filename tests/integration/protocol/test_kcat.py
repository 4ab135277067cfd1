"""kcat (librdkafka's command-line client): produce with keys and headers, consume back
with a format string, compare."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120),
              pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")]

PARTITIONS = 3


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> bytes:
    result = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr.decode()}"
    return result.stdout


@pytest.mark.parametrize("broker", [{"num.partitions": PARTITIONS}], indirect=True)
def test_kcat_keys_headers_round_trip(broker):
    topic = "kcat-topic"
    expected: dict[int, list[tuple[str, str, str]]] = {p: [] for p in range(PARTITIONS)}
    started = int(time.time() * 1000)
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for batch, codec in enumerate(codecs):
        partition = batch % PARTITIONS
        headers = [f"batch={batch}", f"codec={codec}", "same=x"]
        lines = []
        for i in range(200):
            key, value = f"k{batch}-{i}", f"value {batch}/{i} " + "x" * (i % 50)
            lines.append(f"{key}\t{value}")
            expected[partition].append((key, value, ",".join(headers)))
        args = ["-P", "-b", broker.bootstrap, "-t", topic, "-p", str(partition), "-K", "\t",
                "-X", f"compression.codec={codec}"]
        for header in headers:
            args += ["-H", header]
        kcat(*args, stdin=("\n".join(lines) + "\n").encode())

    out = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
               "-f", r"%p\t%o\t%k\t%s\t%h\t%T\n")
    got: dict[int, list[tuple[int, str, str, str, int]]] = {p: [] for p in range(PARTITIONS)}
    for line in out.decode().splitlines():
        partition, offset, key, value, headers, timestamp = line.split("\t")
        got[int(partition)].append((int(offset), key, value, headers, int(timestamp)))
    for partition in range(PARTITIONS):
        rows = sorted(got[partition])
        assert [r[0] for r in rows] == list(range(len(expected[partition]))), f"partition {partition}: offsets"
        assert [(r[1], r[2], r[3]) for r in rows] == expected[partition], f"partition {partition}: records"
        for row in rows:
            assert started - 60_000 <= row[4] <= int(time.time() * 1000) + 60_000, f"odd timestamp {row}"

    # Per-partition reads agree with the whole-topic read, including from a middle offset.
    tail = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-o", "150", "-e", "-q", "-f", r"%o\t%k\n")
    offsets = [int(line.split("\t")[0]) for line in tail.decode().splitlines()]
    assert offsets == list(range(150, len(expected[0])))


@pytest.mark.parametrize("broker", [{"num.partitions": 1}], indirect=True)
def test_kcat_metadata_lists_the_topic(broker):
    kcat("-P", "-b", broker.bootstrap, "-t", "listed", "-K", ":", stdin=b"a:1\nb:2\n")
    listing = kcat("-L", "-b", broker.bootstrap, "-t", "listed").decode()
    assert 'topic "listed" with 1 partitions' in listing, listing
    assert f"broker 0 at {broker.bootstrap}" in listing, listing
