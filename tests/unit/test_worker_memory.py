"""broker/memory.py: after keep_freed_memory(), request-sized buffers come from the heap
(and are reused) instead of a fresh mmap each; without it, glibc maps them."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import sys
from broker.memory import keep_freed_memory

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
