"""Storage micro-benchmark: PartitionLog append throughput and read-descriptor lookups.

Run by hand, never by the test suite::

    .venv/bin/python -m loadtest.micro.bench_storage            # the full run (see --help)
    .venv/bin/python -m loadtest.micro.bench_storage --total-mb 128 --total-mb-1k 32 --repeat 1

What it measures (figures and analysis: docs/BENCHMARKS.md):

* append throughput (MB/s, 1 MB = 10**6 bytes, and batches/s) of one pre-built, valid
  v2 batch of 1 KiB, 16 KiB and 1 MiB appended again and again through
  ``PartitionLog.append`` (validation + CRC-32C check + copy into the shared mmap +
  offset rewrite + index), for three flush policies:

  - ``none``:            flush.messages = flush.ms = LONG_MAX
  - ``flush.messages``:  flush.messages = 1000, counted in RECORDS (as Kafka counts
                         messages), so with R records per batch an fsync every 1000/R
                         batches
  - ``flush.ms``:        flush.ms = 1 with a background thread calling
                         ``log.flush_if_due()`` about every 1 ms (how the LogManager runs
                         it), stopped after the run

  Every row gives two figures: the appends alone, and the appends plus one final
  fsync (``log.flush()``), so "no durability" and "everything durable at the end" can
  be compared with the baseline's same two figures.

* baselines in the same run, same bytes, same total: a plain buffered file write
  (``open(path, 'wb')`` + ``f.write(batch)`` in a loop, without / with a final
  ``os.fsync``), and a raw copy into a shared mmap with the same fallocate window +
  MADV_POPULATE_WRITE scheme as storage/mmap_file.py, without PartitionLog (the floor
  of the mmap design itself).

* read-descriptor lookup latency: ``log.read(offset, max_bytes=1 MiB)`` (which only
  locates the bytes: fd, position, length) for random offsets over the whole log, in
  sealed segments only, in the active segment only, and at the tail.

Each timed run gets a fresh directory under ``--dir`` (removed afterwards) and starts
after an ``os.sync()`` (untimed) so dirty pages of the previous run do not bleed in.
The order of the cases rotates from one repetition to the next.
Caches cannot be dropped here: the page cache is warm, and the numbers are memory /
page-cache throughput unless an fsync is part of the figure.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import mmap
import os
import platform
import pstats
import random
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from storage.batch import HEADER_SIZE
from storage.config import LONG_MAX, LogConfig
from storage.log import PartitionLog
from storage.mmap_file import MADV_POPULATE_WRITE
from storage.records import Record, encode_batch
from storage.types import TopicPartition

KIB = 1024
MIB = 1024 * 1024
MB = 1_000_000
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIR = os.path.join(REPO_ROOT, ".bench-tmp")
TP = TopicPartition("bench", 0)

SIZE_NAMES = {"1k": 1 * KIB, "16k": 16 * KIB, "1m": 1 * MIB}
POLICIES = ("none", "flush.messages", "flush.ms")
CASES = ("write()", "raw mmap", *POLICIES)


# --------------------------------------------------------------------------- machine


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine_info(bench_dir: str) -> dict[str, Any]:
    cpuinfo = _read("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), platform.processor())
    mhz = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("cpu MHz")), "?")
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    meminfo = {line.split(":")[0]: line.split(":")[1].strip() for line in _read("/proc/meminfo").splitlines() if ":" in line}
    mem_kb = int(meminfo.get("MemTotal", "0 kB").split()[0])
    real = os.path.realpath(bench_dir)
    best = ("?", "?", "?", "")
    for line in _read("/proc/mounts").splitlines():
        parts = line.split()
        if len(parts) >= 4 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")):
            if len(parts[1]) >= len(best[3]):
                best = (parts[0], parts[2], parts[3], parts[1])
    device, fstype, options, mountpoint = best
    rotational = ""
    dev_name = os.path.basename(device)
    if dev_name:
        rotational = _read(f"/sys/block/{dev_name}/queue/rotational").strip()
    return {
        "cpu_model": model,
        "cpu_mhz": mhz,
        "cpu_count": os.cpu_count(),
        "virtualized": "hypervisor" in flags,
        "crc32c_hw": "sse4_2" in flags,
        "ram_gib": round(mem_kb / (1024 * 1024), 1),
        "kernel": platform.release(),
        "bench_dir": real,
        "filesystem": f"{fstype} on {device} (mounted at {mountpoint}, {options})",
        "device": device,
        "rotational": rotational,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled").strip(),
        "free_page_reporting": _page_reporting(),
        "fresh_page_touch_mb_s": round(_page_touch_rate(fresh=True)),
        "memory_rewrite_mb_s": round(_page_touch_rate(fresh=False)),
        "dirty_ratio": _read("/proc/sys/vm/dirty_ratio").strip(),
        "dirty_background_ratio": _read("/proc/sys/vm/dirty_background_ratio").strip(),
    }


def _page_reporting() -> str:
    """virtio-balloon free page reporting hands freed guest pages back to the host, so the
    next touch of such a page costs a host fault: the main source of noise on a VM."""
    base = "/sys/module/page_reporting/parameters"
    if not os.path.isdir(base):
        return "no"
    values = {name: _read(os.path.join(base, name)).strip() for name in sorted(os.listdir(base))}
    shown = {k: v for k, v in values.items() if k in ("page_reporting_order", "min_free_ms", "reported_kib")}
    return "yes " + ", ".join(f"{k}={v}" for k, v in shown.items())


def _page_touch_rate(fresh: bool, size: int = 256 * MIB) -> float:
    """MB/s writing ``size`` bytes into anonymous memory: fresh pages (fault + zero) or
    the same pages again (memcpy bandwidth)."""
    chunk = b"\1" * MIB
    region = mmap.mmap(-1, size)
    try:
        if not fresh:
            for position in range(0, size, MIB):
                region[position : position + MIB] = chunk
        start = time.perf_counter()
        for position in range(0, size, MIB):
            region[position : position + MIB] = chunk
        return size / (time.perf_counter() - start) / MB
    finally:
        region.close()


# --------------------------------------------------------------------------- batches


def build_batch(total_size: int, records: int) -> bytes:
    """One valid v2 batch of exactly ``total_size`` bytes holding ``records`` records."""
    if total_size < HEADER_SIZE + 8 * records:
        raise ValueError(f"{total_size} bytes cannot hold {records} records")
    timestamp = int(time.time() * 1000)
    payload = os.urandom(total_size)
    # Start from an estimate, then fix the size: a varint length can jump by one byte, so
    # also try a 1..3 byte key on the last record when a value size cannot land exactly.
    share = (total_size - HEADER_SIZE) // records - 8
    for key_len in (None, 0, 1, 2, 3):
        values = [share] * records
        for _attempt in range(8):
            rows = [Record(i, timestamp, None if (key_len is None or i < records - 1) else b"k" * key_len,
                           payload[: values[i]]) for i in range(records)]
            batch = encode_batch(rows)
            diff = total_size - len(batch)
            if diff == 0:
                return batch
            values[-1] += diff
            if values[-1] < 0:
                break
    raise ValueError(f"could not build a batch of exactly {total_size} bytes")


# --------------------------------------------------------------------------- timing


@dataclass
class RunResult:
    loop_s: float        # the appends / writes alone
    synced_s: float      # plus the final fsync
    fsyncs: int = 0      # fsyncs issued during the loop (by the policy)
    disk_bytes: int = 0  # bytes the block device wrote, loop + final fsync (system-wide counter)
    minor_faults: int = 0  # minor page faults of this process, loop + final fsync


class Counters:
    """Block-device sectors written (/sys/class/block/<dev>/stat) and this process's minor faults."""

    stat_path: str | None = None

    @classmethod
    def configure(cls, device: str) -> None:
        path = f"/sys/class/block/{os.path.basename(device)}/stat"
        cls.stat_path = path if os.path.exists(path) else None

    def __init__(self) -> None:
        self.sectors = self._sectors()
        self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def _sectors(self) -> int:
        if self.stat_path is None:
            return 0
        return int(_read(self.stat_path).split()[6])

    def delta(self) -> tuple[int, int]:
        return ((self._sectors() - self.sectors) * 512,
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt - self.faults)


def _fresh_dir(root: str) -> str:
    return tempfile.mkdtemp(prefix="run-", dir=root)


def _quiesce() -> None:
    os.sync()  # write back what the previous run left dirty (untimed)
    gc.collect()


def run_write_baseline(root: str, batch: bytes, count: int) -> RunResult:
    directory = _fresh_dir(root)
    try:
        path = os.path.join(directory, "baseline.bin")
        _quiesce()
        counters = Counters()
        start = time.perf_counter()
        with open(path, "wb") as f:
            write = f.write
            for _ in range(count):
                write(batch)
            f.flush()
            loop = time.perf_counter()
            os.fsync(f.fileno())
            synced = time.perf_counter()
        disk, faults = counters.delta()
        return RunResult(loop - start, synced - start, 0, disk, faults)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_raw_mmap(root: str, batch: bytes, count: int, max_size: int, window: int) -> RunResult:
    """The mmap design without PartitionLog: fallocate window + populate + slice copy."""
    directory = _fresh_dir(root)
    total = len(batch) * count
    size = max(max_size, total)
    try:
        path = os.path.join(directory, "raw.mmap")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        _quiesce()
        counters = Counters()
        start = time.perf_counter()
        os.ftruncate(fd, size)
        mapped = mmap.mmap(fd, size, mmap.MAP_SHARED)
        reserved = 0
        position = 0
        n = len(batch)
        for _ in range(count):
            end = position + n
            if end > reserved:
                new_reserved = min(size, max(end, reserved + window))
                new_reserved = -(-new_reserved // mmap.PAGESIZE) * mmap.PAGESIZE
                os.posix_fallocate(fd, reserved, new_reserved - reserved)
                mapped.madvise(MADV_POPULATE_WRITE, reserved, new_reserved - reserved)
                reserved = new_reserved
            mapped[position:end] = batch
            position = end
        loop = time.perf_counter()
        os.fdatasync(fd)
        synced = time.perf_counter()
        disk, faults = counters.delta()
        mapped.close()
        os.close(fd)
        return RunResult(loop - start, synced - start, 0, disk, faults)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Flusher(threading.Thread):
    """What the LogManager does for flush.ms: call flush_if_due about every ``period``."""

    def __init__(self, log: PartitionLog, period: float) -> None:
        super().__init__(name="bench-flusher", daemon=True)
        self.log = log
        self.period = period
        self.flushes = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            if self.log.flush_if_due():
                self.flushes += 1
            self._stop_event.wait(self.period)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def policy_config(policy: str, segment_bytes: int, window: int, flush_messages: int, flush_ms: int) -> LogConfig:
    if policy == "none":
        return LogConfig(segment_bytes=segment_bytes, preallocate_window_bytes=window, flush_messages=LONG_MAX, flush_ms=LONG_MAX)
    if policy == "flush.messages":
        return LogConfig(segment_bytes=segment_bytes, preallocate_window_bytes=window, flush_messages=flush_messages, flush_ms=LONG_MAX)
    if policy == "flush.ms":
        return LogConfig(segment_bytes=segment_bytes, preallocate_window_bytes=window, flush_messages=LONG_MAX, flush_ms=flush_ms)
    raise ValueError(policy)


def run_append(root: str, batch: bytes, count: int, policy: str, args: argparse.Namespace,
               profiler: cProfile.Profile | None = None) -> RunResult:
    directory = _fresh_dir(root)
    log: PartitionLog | None = None
    try:
        config = policy_config(policy, args.segment_mb * MIB, args.window_mb * MIB, args.flush_messages, args.flush_ms)
        log = PartitionLog(os.path.join(directory, "bench-0"), TP, config)
        fsyncs = [0]
        real_flush = log.flush

        def counting_flush() -> None:
            fsyncs[0] += 1
            real_flush()

        log.flush = counting_flush  # type: ignore[method-assign]  # counts, changes nothing
        flusher = Flusher(log, args.flusher_period_ms / 1000) if policy == "flush.ms" else None
        _quiesce()
        counters = Counters()
        append = log.append
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        if flusher is not None:
            flusher.start()
        for _ in range(count):
            append(batch)
        if flusher is not None:
            flusher.stop()
        loop = time.perf_counter()
        if profiler is not None:
            profiler.disable()
        real_flush()
        synced = time.perf_counter()
        disk, faults = counters.delta()
        done = fsyncs[0] + (flusher.flushes if flusher is not None else 0)
        assert log.log_end_offset == count * args.records_per_batch
        return RunResult(loop - start, synced - start, done, disk, faults)
    finally:
        if log is not None:
            log.delete()
        shutil.rmtree(directory, ignore_errors=True)


# --------------------------------------------------------------------------- stats


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def size_label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


# --------------------------------------------------------------------------- appends


def bench_appends(args: argparse.Namespace, root: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in args.sizes:
        size = SIZE_NAMES[name]
        total = (args.total_mb_1k if size == KIB else args.total_mb) * MIB
        count = total // size
        batch = build_batch(size, args.records_per_batch)
        print(f"\n== {size_label(size)} batches: {count:,} x {len(batch):,} B = {count * size / MIB:,.0f} MiB per run, "
              f"{args.records_per_batch} record(s)/batch, {args.repeat} run(s) per case", flush=True)
        runs: dict[str, list[RunResult]] = {case: [] for case in args.cases}
        for _ in range(args.warmup):
            run_write_baseline(root, batch, count)  # untimed: page allocator / page cache warm-up
        for rep in range(args.repeat):
            # Rotate the order each repetition: on a VM the state of the page allocator
            # left by the previous run matters, so no case should always come first.
            shift = rep % len(args.cases)
            for case in args.cases[shift:] + args.cases[:shift]:
                if case == "write()":
                    result = run_write_baseline(root, batch, count)
                elif case == "raw mmap":
                    result = run_raw_mmap(root, batch, count, args.segment_mb * MIB, args.window_mb * MIB)
                else:
                    result = run_append(root, batch, count, case, args)
                runs[case].append(result)
                print(f"  run {rep + 1} {case:<15} {total / result.loop_s / MB:7,.0f} MB/s   "
                      f"+final fsync {total / result.synced_s / MB:7,.0f} MB/s   fsyncs during run {result.fsyncs:5}   "
                      f"disk written {result.disk_bytes / total:5.2f}x data   minor faults {result.minor_faults:8,}", flush=True)
        baseline = runs.get("write()")
        for case in args.cases:
            results = runs[case]
            mbps = summary([total / r.loop_s / MB for r in results])
            mbps_synced = summary([total / r.synced_s / MB for r in results])
            batches = summary([count / r.loop_s for r in results])
            row: dict[str, Any] = {
                "batch_size": size, "case": case, "records_per_batch": args.records_per_batch,
                "batches": count, "bytes": total, "runs": len(results),
                "mb_per_s": mbps, "mb_per_s_with_final_fsync": mbps_synced, "batches_per_s": batches,
                "fsyncs_during_run": statistics.median([r.fsyncs for r in results]),
                "disk_written_per_data_byte": statistics.median([r.disk_bytes / total for r in results]),
                "minor_faults_per_mib": statistics.median([r.minor_faults / (total / MIB) for r in results]),
                "loop_seconds": [r.loop_s for r in results], "synced_seconds": [r.synced_s for r in results],
            }
            if baseline:
                base_loop = statistics.median([b.loop_s for b in baseline])
                base_synced = statistics.median([b.synced_s for b in baseline])
                row["time_vs_write"] = statistics.median([r.loop_s for r in results]) / base_loop
                row["time_vs_write_fsync"] = statistics.median([r.synced_s for r in results]) / base_synced
                row["best_time_vs_best_write"] = min(r.loop_s for r in results) / min(b.loop_s for b in baseline)
            rows.append(row)
    return rows


def print_append_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print("\n== Append throughput: median (min-max) of the runs; MB = 10^6 bytes; "
          "'x write()' = median time / median time of write() with the same bytes; 'best' = fastest / fastest")
    header = (f"{'batch':>7} {'case':<15} {'MB/s':>7} {'(min-max)':>15} {'batches/s':>10} {'x write()':>9} {'best':>5} | "
              f"{'+fsync MB/s':>11} {'(min-max)':>13} {'x write()+fsync':>15} | {'fsyncs':>6} {'disk/data':>9} {'faults/MiB':>10}")
    print(header)
    print("-" * len(header))
    for row in rows:
        m, f = row["mb_per_s"], row["mb_per_s_with_final_fsync"]
        print(f"{size_label(row['batch_size']):>7} {row['case']:<15} {m['median']:>7,.0f} "
              f"{'(' + format(m['min'], ',.0f') + '-' + format(m['max'], ',.0f') + ')':>15} "
              f"{row['batches_per_s']['median']:>10,.0f} {row.get('time_vs_write', float('nan')):>9.2f} "
              f"{row.get('best_time_vs_best_write', float('nan')):>5.2f} | "
              f"{f['median']:>11,.0f} {'(' + format(f['min'], ',.0f') + '-' + format(f['max'], ',.0f') + ')':>13} "
              f"{row.get('time_vs_write_fsync', float('nan')):>15.2f} | {row['fsyncs_during_run']:>6.0f} "
              f"{row['disk_written_per_data_byte']:>9.2f} {row['minor_faults_per_mib']:>10,.0f}")
    print(f"\nflush.messages = {args.flush_messages} records; {args.records_per_batch} record(s) per batch, "
          f"so one fsync every {-(-args.flush_messages // args.records_per_batch)} batches "
          f"(every {-(-args.flush_messages // args.records_per_batch) * len(build_batch(KIB, args.records_per_batch)) // KIB:,} KiB of 1 KiB batches, "
          f"x16 for 16 KiB, x1024 for 1 MiB).")
    print(f"flush.ms = {args.flush_ms}: a background thread calls log.flush_if_due() every ~{args.flusher_period_ms:g} ms "
          f"(as the LogManager will); 'fsyncs' counts the flushes it actually did.")


# --------------------------------------------------------------------------- lookups


def percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return float(sorted_values[index])


def bench_lookups(args: argparse.Namespace, root: str) -> dict[str, Any]:
    size = args.lookup_batch_kb * KIB
    count = args.lookup_mb * MIB // size
    batch = build_batch(size, args.records_per_batch)
    directory = _fresh_dir(root)
    log: PartitionLog | None = None
    try:
        config = LogConfig(segment_bytes=args.lookup_segment_mb * MIB, preallocate_window_bytes=args.window_mb * MIB)
        log = PartitionLog(os.path.join(directory, "bench-0"), TP, config)
        print(f"\n== Read-descriptor lookups: building a log of {count:,} x {size_label(size)} batches "
              f"({args.lookup_mb} MiB, segment.bytes {args.lookup_segment_mb} MiB) ...", flush=True)
        start = time.perf_counter()
        for _ in range(count):
            log.append(batch)
        build_s = time.perf_counter() - start
        segments = list(log.segments)
        active = segments[-1]
        leo = log.log_end_offset
        rng = random.Random(args.seed)
        ranges: dict[str, Callable[[], int]] = {"random (whole log)": lambda: rng.randrange(log.log_start_offset, leo)}
        if len(segments) > 1:
            ranges["sealed segments"] = lambda: rng.randrange(segments[0].base_offset, active.base_offset)
        ranges["active segment"] = lambda: rng.randrange(active.base_offset, leo)
        ranges["tail (last batch)"] = lambda: leo - args.records_per_batch
        print(f"   built in {build_s:.1f} s; {len(segments)} segments ({len(segments) - 1} sealed), log end offset {leo:,}; "
              f"{args.lookups:,} lookups per kind, max_bytes = {args.lookup_max_bytes:,}", flush=True)
        out: dict[str, Any] = {"batch_size": size, "batches": count, "segments": len(segments),
                               "segment_bytes": config.segment_bytes, "max_bytes": args.lookup_max_bytes,
                               "lookups": args.lookups, "kinds": {}}
        read = log.read
        max_bytes = args.lookup_max_bytes
        for kind, pick in ranges.items():
            offsets = [pick() for _ in range(args.lookups)]
            for offset in offsets[: min(1000, len(offsets))]:
                read(offset, max_bytes)  # warm-up
            latencies: list[int] = []
            returned = 0
            gc.collect()
            clock = time.perf_counter_ns
            for offset in offsets:
                t0 = clock()
                info = read(offset, max_bytes)
                latencies.append(clock() - t0)
                assert info.file_range is not None
                returned += info.file_range.length
            total_ns = sum(latencies)
            latencies.sort()
            stats = {"p50_us": percentile(latencies, 0.50) / 1000, "p99_us": percentile(latencies, 0.99) / 1000,
                     "max_us": latencies[-1] / 1000, "mean_us": total_ns / len(latencies) / 1000,
                     "ops_per_s": len(latencies) / (total_ns / 1e9), "avg_bytes_located": returned / len(latencies)}
            out["kinds"][kind] = stats
        return out
    finally:
        if log is not None:
            log.delete()
        shutil.rmtree(directory, ignore_errors=True)


def print_lookup_table(result: dict[str, Any]) -> None:
    print(f"\n== log.read(offset, max_bytes={result['max_bytes']:,}) latency, {result['batches']:,} x "
          f"{size_label(result['batch_size'])} batches in {result['segments']} segments")
    header = f"{'offsets':<20} {'p50 us':>8} {'p99 us':>8} {'max us':>9} {'mean us':>8} {'ops/s':>10} {'bytes located':>14}"
    print(header)
    print("-" * len(header))
    for kind, s in result["kinds"].items():
        print(f"{kind:<20} {s['p50_us']:>8.1f} {s['p99_us']:>8.1f} {s['max_us']:>9.1f} {s['mean_us']:>8.1f} "
              f"{s['ops_per_s']:>10,.0f} {s['avg_bytes_located']:>14,.0f}")


# --------------------------------------------------------------------------- profile


def profile_appends(args: argparse.Namespace, root: str) -> dict[str, str]:
    """cProfile one policy=none run per size (outside the timed figures)."""
    out: dict[str, str] = {}
    for name in args.sizes:
        size = SIZE_NAMES[name]
        total = min(args.total_mb_1k if size == KIB else args.total_mb, 256) * MIB
        batch = build_batch(size, args.records_per_batch)
        profiler = cProfile.Profile()
        run_append(root, batch, total // size, "none", args, profiler)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.profile_top)
        print(f"\n== cProfile, {size_label(size)} batches, policy none, {total // MIB} MiB (tottime order)")
        lines = text.getvalue().splitlines()
        body = [line for line in lines if line.strip()][2:]
        print("\n".join(body))
        out[size_label(size)] = text.getvalue()
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.micro.bench_storage",
        description="PartitionLog append throughput (mmap path) per batch size and flush policy, beside a plain "
                    "buffered file write of the same bytes, and read-descriptor lookup latency.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dir", default=DEFAULT_DIR,
                        help="parent of the per-run temp directories (same filesystem as the log dirs you care about); "
                             "created if missing and removed afterwards if it was created")
    parser.add_argument("--sizes", default="1k,16k,1m", help="batch sizes to run, comma-separated, from 1k,16k,1m")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"cases to run, comma-separated, from {','.join(CASES)}")
    parser.add_argument("--total-mb", type=int, default=1024, help="MiB written per run for 16 KiB and 1 MiB batches")
    parser.add_argument("--total-mb-1k", type=int, default=256,
                        help="MiB written per run for 1 KiB batches (per-append cost dominates there; keep the run short)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; median and min/max are printed")
    parser.add_argument("--warmup", type=int, default=1, help="untimed write() runs before each size's timed runs")
    parser.add_argument("--records-per-batch", type=int, default=1, help="records in each pre-built batch")
    parser.add_argument("--segment-mb", type=int, default=1024, help="segment.bytes in MiB (a roll happens when total > this)")
    parser.add_argument("--window-mb", type=int, default=16, help="preallocate.window.bytes in MiB (the broker default is 16)")
    parser.add_argument("--flush-messages", type=int, default=1000, help="flush.messages for the flush.messages policy (records)")
    parser.add_argument("--flush-ms", type=int, default=1, help="flush.ms for the flush.ms policy")
    parser.add_argument("--flusher-period-ms", type=float, default=1.0, help="how often the flusher thread calls flush_if_due")
    parser.add_argument("--lookup-mb", type=int, default=256, help="MiB of batches in the log used for lookups (0: skip)")
    parser.add_argument("--lookup-batch-kb", type=int, default=1, help="batch size of that log, KiB")
    parser.add_argument("--lookup-segment-mb", type=int, default=64, help="segment.bytes of that log, MiB (to get sealed segments)")
    parser.add_argument("--lookups", type=int, default=20000, help="timed lookups per kind of offset")
    parser.add_argument("--lookup-max-bytes", type=int, default=MIB, help="max_bytes of each log.read")
    parser.add_argument("--seed", type=int, default=1, help="random seed for lookup offsets")
    parser.add_argument("--profile", action="store_true", help="also cProfile one policy=none run per size (not timed)")
    parser.add_argument("--profile-top", type=int, default=15, help="rows of each profile")
    parser.add_argument("--json", metavar="PATH", help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    args.sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    for s in args.sizes:
        if s not in SIZE_NAMES:
            parser.error(f"unknown size {s!r}; choose from {', '.join(SIZE_NAMES)}")
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in args.cases:
        if c not in CASES:
            parser.error(f"unknown case {c!r}; choose from {', '.join(CASES)}")
    if args.repeat < 1 or args.records_per_batch < 1:
        parser.error("--repeat and --records-per-batch must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = f"{sys.executable} -m loadtest.micro.bench_storage {shlex.join(sys.argv[1:] if argv is None else argv)}"
    created = not os.path.exists(args.dir)
    os.makedirs(args.dir, exist_ok=True)
    machine = machine_info(args.dir)
    Counters.configure(machine["device"])
    print(f"command: {command}")
    print(f"cwd:     {os.getcwd()}")
    for key, value in machine.items():
        print(f"{key + ':':<24} {value}")
    print(f"settings: sizes {args.sizes}, {args.total_mb} MiB per run ({args.total_mb_1k} MiB for 1 KiB batches), "
          f"repeat {args.repeat}, segment.bytes {args.segment_mb} MiB, preallocate window {args.window_mb} MiB, "
          f"{args.records_per_batch} record(s)/batch")
    print("note: page cache warm (caches cannot be dropped here); os.sync() before each run, untimed; "
          "figures without fsync are memory/page-cache throughput.")
    results: dict[str, Any] = {"command": command, "machine": machine, "args": {k: v for k, v in vars(args).items()},
                               "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    wall = time.perf_counter()
    try:
        rows = bench_appends(args, args.dir)
        results["appends"] = rows
        if rows:
            print_append_table(rows, args)
        if args.lookup_mb > 0:
            lookups = bench_lookups(args, args.dir)
            results["lookups"] = lookups
            print_lookup_table(lookups)
        if args.profile:
            results["profiles"] = profile_appends(args, args.dir)
    finally:
        if created:
            shutil.rmtree(args.dir, ignore_errors=True)
    results["wall_seconds"] = time.perf_counter() - wall
    print(f"\nwall time {results['wall_seconds']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
