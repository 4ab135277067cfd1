"""The page-cache ingest limit: how fast this machine takes new bytes into a filesystem's page cache.

A broker that keeps what it is sent cannot accept bytes faster than the kernel can put
new bytes into the page cache, whatever the broker is written in. librdkafka's mock
cluster keeps ~5 MiB per partition in memory and drops the rest, so it never pays this;
a max-throughput run that stores tens of GB does. This tool measures that ceiling with
nothing of a broker in the way, on the data directory's filesystem, in the memory state
the machine is in:

* ``write``: ``os.write`` of one 1 MiB buffer, again and again, into a new file: the path
  of a broker that writes its log with write() (Kafka's FileChannel.write).
* ``mmap``: Castle's write path without Castle (DESIGN.md non-negotiable 3): the file is
  extended to its size, blocks are reserved with fallocate a ``--window-mib`` window
  ahead, each chunk's pages get page-cache pages from a pwrite of zeros and are mapped
  with MADV_POPULATE_WRITE (storage/mmap_file.py), and the chunk is copied into the map.
* ``mmap-madvise``: the same without the zeros: MADV_POPULATE_WRITE faults the pages in
  itself, a page at a time (Castle's path before 2026-11-29).

``--writers N`` runs N writer processes at once (a broker with N workers), each with its
own file and 1/N of the bytes; the rate is all bytes over the span from the first
start to the last end. Each run records the writers' CPU time and the rate of each
second, so the fast start (while the machine hands out pages it already holds) and the
sustained rate after it can be told apart (``sustained_mib_per_s``: the second half of
the run). Files are deleted after each run.

Memory state matters on a VM (docs/BENCHMARKS.md, "Memory state"): where the hypervisor
takes freed memory back, every new page costs a host fault; ``MemFree`` and ``Cached``
before each run are in the result. Freed pages are taken back after a while, so
``--pause-s`` between runs decides whether a run sees the previous run's pages.

    python -m loadtest.ingest_limit --size-mib 8192 --mode write --mode mmap --writers 1 --writers 2 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import json
import mmap
import multiprocessing
import os
import resource
import statistics
import sys
import time
from typing import Any

MIB = 1024 * 1024
BROKER_MODES = ("write", "mmap")  # the paths brokers take (Kafka's, Castle's): the limit the runner measures
MODES = (*BROKER_MODES, "mmap-madvise")
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Python 3.11 lacks the name
FILE_PREFIX = "castle-ingest-limit-"


def _meminfo() -> dict[str, int]:
    """MemFree, Cached and Dirty in MiB."""
    wanted = {"MemFree", "Cached", "Dirty"}
    out: dict[str, int] = {}
    with open("/proc/meminfo") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if name in wanted:
                out[name] = int(rest.split()[0]) // 1024
    return out


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write_file(path: str, size: int, chunk: memoryview, marks: list[float]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < size:
            written += os.write(fd, chunk[: min(len(chunk), size - written)])
            marks.append(time.monotonic())
    finally:
        os.close(fd)


def _mmap_file(path: str, size: int, chunk: memoryview, window: int, marks: list[float],
               zeros: memoryview | None) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        mapped = mmap.mmap(fd, size, mmap.MAP_SHARED)
        try:
            reserved = 0
            position = 0
            while position < size:
                end = min(size, position + len(chunk))
                if end > reserved:
                    new_reserved = min(size, max(end, reserved + window))
                    os.posix_fallocate(fd, reserved, new_reserved - reserved)
                    reserved = new_reserved
                page_start = position // mmap.PAGESIZE * mmap.PAGESIZE
                if zeros is not None:
                    os.pwrite(fd, zeros[: end - page_start], page_start)
                mapped.madvise(MADV_POPULATE_WRITE, page_start, end - page_start)
                mapped[position:end] = chunk[: end - position]
                position = end
                marks.append(time.monotonic())
        finally:
            mapped.close()
    finally:
        os.close(fd)


def write_one(mode: str, path: str, size: int, chunk_bytes: int, window: int) -> dict[str, Any]:
    """One writer: put ``size`` new bytes into ``path``; return its timings (monotonic
    clock, which is system-wide, so writers in other processes compare)."""
    chunk = memoryview(os.urandom(chunk_bytes))
    marks: list[float] = []
    cpu0 = _cpu_self()
    started = time.monotonic()
    try:
        if mode == "write":
            _write_file(path, size, chunk, marks)
        else:
            _mmap_file(path, size, chunk, window, marks, memoryview(bytes(len(chunk))) if mode == "mmap" else None)
    finally:
        cpu = _cpu_self() - cpu0
        ended = time.monotonic()
    return {"started": started, "ended": ended, "cpu_s": cpu, "marks": marks, "chunk_bytes": chunk_bytes}


def _writer_child(args: tuple[str, str, int, int, int]) -> dict[str, Any]:
    return write_one(*args)


def _per_second(results: list[dict[str, Any]], t0: float) -> list[float]:
    """MiB written in each second since t0, over all writers."""
    seconds: list[float] = []
    for result in results:
        for mark in result["marks"]:
            index = int(mark - t0)
            while len(seconds) <= index:
                seconds.append(0.0)
            seconds[index] += result["chunk_bytes"] / MIB
    return seconds


def run_once(mode: str, writers: int, size_bytes: int, chunk_bytes: int, window: int, directory: str) -> dict[str, Any]:
    """One run of ``mode`` with ``writers`` processes; the files are removed afterwards."""
    share = size_bytes // writers
    paths = [os.path.join(directory, f"{FILE_PREFIX}{os.getpid()}-{i}.bin") for i in range(writers)]
    memory = _meminfo()
    try:
        if writers == 1:
            results = [write_one(mode, paths[0], share, chunk_bytes, window)]
        else:
            with multiprocessing.get_context("fork").Pool(writers) as pool:
                results = pool.map(_writer_child, [(mode, path, share, chunk_bytes, window) for path in paths])
    finally:
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    t0 = min(r["started"] for r in results)
    seconds = max(r["ended"] for r in results) - t0
    total = share * writers
    per_second = _per_second(results, t0)
    whole = per_second[:-1]  # the last second is partial
    second_half = whole[len(whole) // 2:]
    return {
        "mode": mode,
        "writers": writers,
        "bytes": total,
        "seconds": round(seconds, 3),
        "mib_per_s": round(total / MIB / seconds, 1),
        "sustained_mib_per_s": round(statistics.mean(second_half), 1) if second_half else None,
        "cpu_s": round(sum(r["cpu_s"] for r in results), 2),
        "mib_per_cpu_s": round(total / MIB / max(sum(r["cpu_s"] for r in results), 1e-9), 1),
        "per_second_mib": [round(x, 1) for x in per_second],
        "memory_before_mib": memory,
    }


def measure(size_mib: float, modes: tuple[str, ...], writer_counts: tuple[int, ...], repeat: int, directory: str,
            chunk_mib: float = 1, window_mib: float = 16, pause_s: float = 0.0,
            progress: Any = None) -> dict[str, Any]:
    size_bytes = int(size_mib * MIB)
    chunk_bytes = int(chunk_mib * MIB)
    if size_bytes < chunk_bytes or chunk_bytes < mmap.PAGESIZE or chunk_bytes % mmap.PAGESIZE:
        raise ValueError("--chunk-mib must be a whole number of pages, no larger than --size-mib")
    os.makedirs(directory, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for round_index in range(repeat):
        for mode in modes:
            for writers in writer_counts:
                if runs and pause_s:
                    time.sleep(pause_s)
                run = run_once(mode, writers, size_bytes, chunk_bytes, int(window_mib * MIB), directory)
                run["round"] = round_index + 1
                runs.append(run)
                if progress:
                    progress(f"{mode} x{writers}: {run['mib_per_s']:.0f} MiB/s (sustained {run['sustained_mib_per_s']}), "
                             f"{run['mib_per_cpu_s']:.0f} MiB per CPU-s")
    summary = {}
    for mode in modes:
        for writers in writer_counts:
            rates = [r["mib_per_s"] for r in runs if r["mode"] == mode and r["writers"] == writers]
            summary[f"{mode}x{writers}"] = {"median_mib_per_s": statistics.median(rates), "min_mib_per_s": min(rates),
                                            "max_mib_per_s": max(rates)}
    return {"size_mib": size_mib, "chunk_bytes": chunk_bytes, "window_bytes": int(window_mib * MIB), "directory": directory,
            "cpus": os.cpu_count(), "runs": runs, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.ingest_limit", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=float, default=4096, help="bytes per run, over all writers (default 4096 MiB)")
    parser.add_argument("--mode", action="append", choices=MODES, help="write, mmap, mmap-madvise (repeatable; default write and mmap)")
    parser.add_argument("--writers", action="append", type=int, help="writer processes (repeatable; default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--chunk-mib", type=float, default=1, help="bytes per write / copy (default 1 MiB)")
    parser.add_argument("--window-mib", type=float, default=16, help="mmap: fallocate window (default 16 MiB, Castle's)")
    parser.add_argument("--pause-s", type=float, default=0, help="sleep between runs (default 0)")
    parser.add_argument("--dir", default="/var/tmp", help="a directory on the data's filesystem (default /var/tmp)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    writer_counts = tuple(args.writers or [1])
    if any(n < 1 for n in writer_counts):
        parser.error("--writers must be at least 1")
    try:
        result = measure(args.size_mib, tuple(args.mode or BROKER_MODES), writer_counts, args.repeat, args.dir,
                         args.chunk_mib, args.window_mib, args.pause_s,
                         progress=lambda m: print(f"ingest_limit: {m}", file=sys.stderr, flush=True))
    except (ValueError, OSError) as exc:
        print(f"ingest_limit: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"ingest limit: {result['size_mib']:.0f} MiB per run into {result['directory']}, {result['cpus']} CPUs")
    print(f"{'mode':<12} {'writers':>7} {'round':>5} {'MiB/s':>7} {'sustained':>9} {'MiB/CPU-s':>9} {'MemFree before':>14}")
    for run in result["runs"]:
        print(f"{run['mode']:<12} {run['writers']:>7} {run['round']:>5} {run['mib_per_s']:>7.0f} "
              f"{run['sustained_mib_per_s'] or 0:>9.0f} {run['mib_per_cpu_s']:>9.0f} {run['memory_before_mib'].get('MemFree', 0):>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
