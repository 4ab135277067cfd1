"""Put a machine's memory in the state a long-running broker host is in: full of page cache.

Why this exists: on a VM whose host hands out memory lazily (and takes freed memory back
through virtio free page reporting, as the benchmark machine does), the first touch of
every never-used or returned 4 KiB page costs a host fault. A broker appending to its log
needs a fresh page-cache page for every 4 KiB it stores, so on such a VM just after boot
(about 22 GiB of free, untouched memory) every broker that keeps its data, Kafka included,
pays ~2-3 ms per MB for the host's page population: a write() of new data into the page
cache runs at ~370-480 MB/s here (docs/BENCHMARKS.md). A host that has run a broker for a
while has no free memory: its page cache holds old segments, and new pages come from
reclaiming those, without host faults.

This tool reproduces that state: it reads a sparse file (no disk blocks) into the page
cache until only ``--leave-free-mib`` of memory is free. The pages are clean, so the kernel
reclaims them as soon as anything needs memory. ``--remove`` deletes the file (its pages
are freed, and such a VM then returns them to the host).

    python -m loadtest.fill_page_cache --dir /var/tmp --leave-free-mib 1024
    python -m loadtest.fill_page_cache --dir /var/tmp --remove
"""

from __future__ import annotations

import argparse
import mmap
import os
import time

FILE_NAME = "castle-page-cache-fill.bin"
STEP = 64 << 20
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)


def meminfo_kib(field: str) -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def fill(path: str, leave_free_mib: int) -> tuple[int, float]:
    """Grow the cached part of ``path`` until MemFree is down to ``leave_free_mib``;
    return (bytes read into the cache, seconds)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        cached = os.fstat(fd).st_size
        want = max(0, meminfo_kib("MemFree") * 1024 - leave_free_mib * (1 << 20)) // STEP * STEP
        size = cached + want
        if want == 0:
            return 0, 0.0
        os.ftruncate(fd, size)
        started = time.monotonic()
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) as view:
            for position in range(0, size, STEP):
                view.madvise(MADV_POPULATE_READ, position, min(STEP, size - position))
        return want, time.monotonic() - started
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="where the sparse file lives (any local filesystem)")
    parser.add_argument("--leave-free-mib", type=int, default=1024, help="memory to leave free (MiB)")
    parser.add_argument("--remove", action="store_true", help="delete the file and free its pages")
    args = parser.parse_args(argv)
    path = os.path.join(args.dir, FILE_NAME)
    if args.remove:
        if os.path.exists(path):
            os.unlink(path)
        print(f"removed {path}; MemFree {meminfo_kib('MemFree') >> 10} MiB")
        return 0
    read, seconds = fill(path, args.leave_free_mib)
    rate = f" at {read / seconds / 1e6:,.0f} MB/s" if seconds else ""
    print(f"cached {read >> 20} MiB more of {path} in {seconds:.1f} s{rate}; "
          f"MemFree {meminfo_kib('MemFree') >> 10} MiB, Cached {meminfo_kib('Cached') >> 10} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
