"""broker/network/memory.py: after keep_freed_memory(), request-sized buffers come from the heap
(and are reused) instead of a fresh mmap each; without it, glibc maps them."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import sys
from broker.network.memory import keep_freed_memory

def heap_size():
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            return end - start
    return 0

if sys.argv[1] == "tuned":
    assert keep_freed_memory()
before = heap_size()
held = [bytearray(2 << 20) for _ in range(4)]  # four ~1 MB-class request buffers
print(heap_size() - before)
"""


def heap_growth(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc/self/maps")
def test_large_buffers_come_from_the_heap_once_tuned():
    assert heap_growth("default") < 8 << 20, "glibc served 2 MiB buffers from the heap without tuning?"
    assert heap_growth("tuned") >= 8 << 20


def test_a_receive_buffer_is_a_bytearray_that_recv_into_fills_whole():
    import socket
    import threading

    from broker.protocol.frame_reader import receive_buffer

    payload = bytes(range(256)) * 4096  # 1 MiB
    buffer = receive_buffer(len(payload))
    assert type(buffer) is bytearray and len(buffer) == len(payload)
    left, right = socket.socketpair()
    with left, right:
        left.settimeout(10)
        right.settimeout(10)
        sender = threading.Thread(target=left.sendall, args=(payload,), daemon=True)
        sender.start()
        filled = 0
        with memoryview(buffer) as view:
            while filled < len(payload):
                received = right.recv_into(view[filled:])
                assert received, "the sender stopped early"
                filled += received
        sender.join(10)
    assert buffer == payload
    buffer += b"!"  # an ordinary bytearray: it grows like any other
    assert len(buffer) == len(payload) + 1 and buffer[-1:] == b"!"


def test_receive_buffers_are_not_zero_filled():
    # A freed, dirtied heap block is handed out again as it is: the point of the helper.
    # (bytearray(size) of the same size would come back all zeros.)
    code = (
        "from broker.network.memory import keep_freed_memory\n"
        "from broker.protocol.frame_reader import receive_buffer\n"
        "keep_freed_memory()\n"
        "b = receive_buffer(1 << 20); b[:] = b'\\xab' * (1 << 20); del b\n"
        "c = receive_buffer(1 << 20)\n"
        "print(c.count(0xab) > 0, bytearray(1 << 20).count(0) == 1 << 20)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["True", "True"]
