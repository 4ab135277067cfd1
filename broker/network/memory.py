"""Keep the worker's freed heap memory for reuse instead of handing it back to the kernel.

Why: a Produce request is one buffer of up to message.max.bytes (~1 MB by default), and
so was a forwarded request pickled for the hop between workers (before the rings). glibc serves allocations that large with a
fresh mmap and unmaps them on free, so every request paid for new pages: a page fault
and a zero-fill per 4 KiB, and on a VM that returns freed memory to its host (virtio
free page reporting, as on the benchmark machine) a host fault per page as well. A
py-spy profile of a 1 KiB-record produce run showed pickling 1 MB for that hop taking
~2.8 ms, almost all of it in those faults (docs/BENCHMARKS.md).

Raising glibc's mmap threshold to its maximum (32 MiB on 64-bit) puts such buffers on the
heap, and a high trim threshold keeps the freed heap top mapped, so the next request
reuses warm pages. The cost is resident memory up to the peak of in-flight requests per
worker, which the connection's queue limits already bound.

Not glibc (musl, other libcs): nothing is changed; the broker works as before.

The other half, the buffer a large frame is received into without a zero-fill, is
broker/protocol/frame_reader.py's ``receive_buffer``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's ceiling on 64-bit: 4 MiB * sizeof(long)
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Tune glibc's malloc in this process; return whether it took effect."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not ok:
        log.info("mallopt refused the threshold settings; large buffers stay mmap-backed")
    return ok
