"""The loopback sendfile limit: how fast this machine moves file bytes into a 127.0.0.1 socket.

A broker's zero-copy fetch path is ``os.sendfile`` from a log segment (in the page
cache) into the consumer's socket. On one machine, with the consumer on the other end
of a loopback connection, the fastest that can possibly go is set by the kernel: the
page-cache-to-socket copy of sendfile, loopback TCP, and the reader's copy out of its
socket. This tool measures exactly that, with nothing of a broker in the way:

* a file of ``--size-mib`` (created, or reused when one of that size is there) is read
  once to put it in the page cache;
* per repeat, a reader child process (``python -c``) connects to the sender's listening socket on
  127.0.0.1 and only ``recv_into()``s a reusable ``--recv-kib`` buffer until EOF,
  counting bytes; the sender ``os.sendfile()``s the whole file in ``--chunk-mib`` calls;
* the same again with a plain ``socket.sendall`` of a ``--chunk-mib`` memory buffer
  (filled from the file's first chunk) repeated to the same total: the copy path, for
  comparison. The buffer is small and stays in the CPU cache, so this is the best case
  of a copying sender (a broker serving from memory), not a read-from-page-cache-then-send;
* optionally (``--mode read_send``), that too: ``os.preadv`` of each chunk of the file
  into one reusable buffer, then ``sendall``: what a broker without sendfile does.

The rate is bytes / (time the reader saw EOF - time the sender started), both on
CLOCK_MONOTONIC, which is system-wide. Each run reports the CPU time of the sender
(this process) and of the reader (the child), from getrusage, and the whole machine's
busy, softirq and steal time from /proc/stat: on loopback much of the TCP receive work
runs in softirq context on whichever CPU sends, and the kernel may account it to neither
process. The machine figures count every process: on a shared machine, other work shows
up there (``machine_other_cpu_s``, roughly busy - softirq - ours) and slows the runs;
``max_mib_per_s`` is then the better estimate of the ceiling than the median. Runs alternate sendfile, copy, sendfile, copy... so that drift hits both.

A consumer's catch-up read through a broker is to be compared against the sendfile
median: it cannot go faster on this machine.

    python -m loadtest.loopback_limit --size-mib 2048 --chunk-mib 1 --repeat 3 --dir /var/tmp --json

The file is deleted at the end unless ``--keep`` (then it is reused by the next run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time
from typing import Any, Callable

MIB = 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
FILE_PREFIX = "castle-loopback-limit-"
MODES = ("sendfile", "copy", "read_send")
DEFAULT_MODES = ("sendfile", "copy")
ACCEPT_TIMEOUT = 60.0
MIN_RATE_FOR_TIMEOUT = 20 * MIB  # a run slower than this (bytes/s) is given up on


# --------------------------------------------------------------------------- file


def file_path(directory: str, size_bytes: int) -> str:
    return os.path.join(directory, f"{FILE_PREFIX}{size_bytes}.bin")


def prepare_file(directory: str, size_bytes: int) -> tuple[str, bool]:
    """The test file (path, created): reused if one of exactly this size exists. Its
    content is a random 1 MiB block repeated (no holes), written through and fsync'ed so
    that no writeback runs during the measurement."""
    path = file_path(directory, size_bytes)
    try:
        if os.stat(path).st_size == size_bytes:
            return path, False
    except FileNotFoundError:
        pass
    os.makedirs(directory, exist_ok=True)
    block = os.urandom(MIB) * 8
    tmp = path + f".{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < size_bytes:
            written += os.write(fd, memoryview(block)[: min(len(block), size_bytes - written)])
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    return path, True


def warm(path: str, block: int = 8 * MIB) -> float:
    """Read the whole file once (into the page cache); returns the seconds it took."""
    started = time.monotonic()
    buffer = bytearray(block)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        while os.readv(fd, [buffer]) > 0:
            pass
    finally:
        os.close(fd)
    return time.monotonic() - started


# --------------------------------------------------------------------------- CPU


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine_ticks() -> tuple[int, int, int]:
    """(busy, softirq, steal) ticks of all CPUs from /proc/stat; busy is user + nice +
    system + irq + softirq, of every process on the machine, not only ours."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy, fields[6], fields[7]


# --------------------------------------------------------------------------- one run


def _reader(port: int, recv_size: int) -> dict[str, Any]:
    """The child: connect, recv_into one buffer until EOF, return what it counted."""
    try:
        cpu0 = _cpu_self()
        sock = socket.create_connection(("127.0.0.1", port), timeout=ACCEPT_TIMEOUT)
        sock.settimeout(None)
        buffer = bytearray(recv_size)
        total = 0
        first = None
        recvs = 0
        while True:
            n = sock.recv_into(buffer)
            if n == 0:
                break
            if first is None:
                first = time.monotonic()
            total += n
            recvs += 1
        end = time.monotonic()
        cpu = _cpu_self() - cpu0
        sock.close()
        return {"bytes": total, "first_byte": first, "eof": end, "cpu_s": cpu, "recvs": recvs}
    except Exception as exc:  # reported to the parent, which raises it
        return {"error": repr(exc)}


def _reader_main() -> None:
    """Entry point of the reader child (``python -c``): ``argv`` = port, recv size; one JSON line out."""
    print(json.dumps(_reader(int(sys.argv[1]), int(sys.argv[2]))), flush=True)


def _start_reader(port: int, recv_bytes: int) -> subprocess.Popen[str]:
    # A plain child process rather than multiprocessing: "spawn" re-imports the caller's
    # __main__ (a script without a main guard, or stdin, breaks), and "fork" copies the
    # caller (threads, pytest) into it.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    code = "from loadtest.loopback_limit import _reader_main; _reader_main()"
    return subprocess.Popen([sys.executable, "-c", code, str(port), str(recv_bytes)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True, env=env)


def run_once(path: str, size_bytes: int, mode: str, chunk_bytes: int = MIB, recv_bytes: int = MIB,
             timeout: float | None = None) -> dict[str, Any]:
    """One transfer of ``size_bytes`` to a reader child; ``mode`` is one of MODES."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    buffer = memoryview(b"")
    if timeout is None:
        timeout = 60.0 + size_bytes / MIN_RATE_FOR_TIMEOUT
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(ACCEPT_TIMEOUT)
    file_fd = -1
    sock: socket.socket | None = None
    reader = _start_reader(listener.getsockname()[1], recv_bytes)
    try:
        sock, _address = listener.accept()
        # Blocking, as a broker's sendfile path effectively is; SO_SNDTIMEO instead of a
        # Python timeout (which would make the fd non-blocking and add a poll per EAGAIN).
        sock.setblocking(True)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(timeout), 0))
        if mode in ("sendfile", "read_send"):
            file_fd = os.open(path, os.O_RDONLY)
        if mode == "read_send":
            buffer = memoryview(bytearray(chunk_bytes))
        elif mode == "copy":
            with open(path, "rb") as handle:
                buffer = memoryview(bytearray(handle.read(chunk_bytes)).ljust(chunk_bytes, b"\x00"))
        machine0 = _machine_ticks()
        cpu0 = _cpu_self()
        started = time.monotonic()
        sent = 0
        calls = 0
        if mode == "sendfile":
            out = sock.fileno()
            while sent < size_bytes:
                n = os.sendfile(out, file_fd, sent, min(chunk_bytes, size_bytes - sent))
                if n == 0:
                    raise RuntimeError(f"sendfile returned 0 at offset {sent} of {size_bytes}")
                sent += n
                calls += 1
        elif mode == "read_send":
            while sent < size_bytes:
                n = os.preadv(file_fd, [buffer[: min(chunk_bytes, size_bytes - sent)]], sent)
                if n == 0:
                    raise RuntimeError(f"preadv returned 0 at offset {sent} of {size_bytes}")
                sock.sendall(buffer[:n])
                sent += n
                calls += 1
        else:
            while sent < size_bytes:
                piece = buffer[: min(chunk_bytes, size_bytes - sent)]
                sock.sendall(piece)
                sent += len(piece)
                calls += 1
        sender_done = time.monotonic()
        sender_cpu = _cpu_self() - cpu0
        sock.shutdown(socket.SHUT_WR)
        try:
            output, _ = reader.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the reader did not report within {timeout:.0f} s") from None
        machine1 = _machine_ticks()
    finally:
        if file_fd >= 0:
            os.close(file_fd)
        if sock is not None:
            sock.close()
        listener.close()
        if reader.poll() is None:
            reader.kill()
        reader.wait(10)
        if reader.stdout is not None:
            reader.stdout.close()
    try:
        result = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"the reader exited with {reader.returncode} and no result") from None
    if "error" in result:
        raise RuntimeError(f"reader failed: {result['error']}")
    seconds = result["eof"] - started
    busy = (machine1[0] - machine0[0]) / CLOCK_TICKS
    softirq = (machine1[1] - machine0[1]) / CLOCK_TICKS
    return {
        "mode": mode,
        "bytes": result["bytes"],
        "bytes_sent": sent,
        "seconds": round(seconds, 4),
        "mib_per_s": round(result["bytes"] / MIB / seconds, 1),
        "sender_seconds": round(sender_done - started, 4),
        "sender_cpu_s": round(sender_cpu, 3),
        "reader_cpu_s": round(result["cpu_s"], 3),
        "sender_cpu_pct": round(100 * sender_cpu / seconds, 1),
        "reader_cpu_pct": round(100 * result["cpu_s"] / seconds, 1),
        "machine_busy_cpu_s": round(busy, 2),
        "machine_softirq_cpu_s": round(softirq, 2),
        # Roughly what other processes used meanwhile (tick granularity: +-0.01 s per CPU).
        "machine_other_cpu_s": round(max(0.0, busy - softirq - sender_cpu - result["cpu_s"]), 2),
        "machine_steal_cpu_s": round((machine1[2] - machine0[2]) / CLOCK_TICKS, 2),
        "send_calls": calls,
        "recv_calls": result["recvs"],
    }


# --------------------------------------------------------------------------- the measurement


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["mib_per_s"] for r in runs]
    return {
        "runs": runs,
        "median_mib_per_s": round(statistics.median(rates), 1),
        "min_mib_per_s": min(rates),
        "max_mib_per_s": max(rates),
        "median_sender_cpu_pct": round(statistics.median(r["sender_cpu_pct"] for r in runs), 1),
        "median_reader_cpu_pct": round(statistics.median(r["reader_cpu_pct"] for r in runs), 1),
    }


def measure(size_mib: float = 1024, chunk_mib: float = 1, repeat: int = 3, directory: str = "/var/tmp",
            keep: bool = False, recv_kib: int = 1024, modes: tuple[str, ...] = DEFAULT_MODES,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Warm the file, then ``repeat`` runs of each mode (alternating); see the module doc."""
    size_bytes = int(size_mib * MIB)
    chunk_bytes = int(chunk_mib * MIB)
    recv_bytes = int(recv_kib * 1024)
    if size_bytes <= 0 or chunk_bytes <= 0 or recv_bytes <= 0 or repeat < 1:
        raise ValueError("size, chunk, recv buffer and repeat must be positive")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
    say = progress or (lambda _message: None)
    path, created = prepare_file(directory, size_bytes)
    try:
        say(f"{'created' if created else 'reusing'} {path} ({size_bytes / MIB:.0f} MiB)")
        warm_s = warm(path)
        say(f"warm read: {warm_s:.2f} s ({size_bytes / MIB / warm_s:.0f} MiB/s)")
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
        for index in range(repeat):
            for mode in modes:
                run = run_once(path, size_bytes, mode, chunk_bytes, recv_bytes)
                runs[mode].append(run)
                say(f"run {index + 1}/{repeat} {mode}: {run['mib_per_s']:.0f} MiB/s "
                    f"(sender CPU {run['sender_cpu_pct']:.0f}%, reader CPU {run['reader_cpu_pct']:.0f}%)")
    finally:
        if not keep:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    out: dict[str, Any] = {
        "file": path,
        "file_created": created,
        "file_kept": keep,
        "size_bytes": size_bytes,
        "size_mib": round(size_bytes / MIB, 3),
        "chunk_bytes": chunk_bytes,
        "recv_bytes": recv_bytes,
        "repeat": repeat,
        "cpus": os.cpu_count(),
        "warm_read_s": round(warm_s, 3),
    }
    for mode in modes:
        out[mode] = _summary(runs[mode])
    if "sendfile" in out and "copy" in out:
        out["sendfile_over_copy"] = round(out["sendfile"]["median_mib_per_s"] / out["copy"]["median_mib_per_s"], 2)
    if "sendfile" in out and "read_send" in out:
        out["sendfile_over_read_send"] = round(out["sendfile"]["median_mib_per_s"] / out["read_send"]["median_mib_per_s"], 2)
    return out


def _print_human(result: dict[str, Any]) -> None:
    print(f"loopback limit: {result['size_mib']:.0f} MiB file, {result['chunk_bytes'] / MIB:g} MiB chunks, "
          f"{result['recv_bytes'] // 1024} KiB reader buffer, {result['repeat']} runs each, {result['cpus']} CPUs")
    print(f"{'mode':<9} {'run':>3} {'MiB/s':>8} {'seconds':>8} {'sender CPU':>10} {'reader CPU':>10} "
          f"{'softirq s':>9} {'others CPU s':>12}")
    for mode in MODES:
        if mode not in result:
            continue
        for index, run in enumerate(result[mode]["runs"], 1):
            print(f"{mode:<9} {index:>3} {run['mib_per_s']:>8.0f} {run['seconds']:>8.3f} {run['sender_cpu_pct']:>9.0f}% "
                  f"{run['reader_cpu_pct']:>9.0f}% {run['machine_softirq_cpu_s']:>9.2f} {run['machine_other_cpu_s']:>12.2f}")
        print(f"{mode:<9} median {result[mode]['median_mib_per_s']:.0f} MiB/s, best {result[mode]['max_mib_per_s']:.0f} MiB/s")
    for key in ("sendfile_over_copy", "sendfile_over_read_send"):
        if key in result:
            print(f"{key.replace('_over_', ' / ')}: {result[key]:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.loopback_limit", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=float, default=1024, help="file size (default 1024 MiB)")
    parser.add_argument("--chunk-mib", type=float, default=1, help="bytes per sendfile / send call (default 1 MiB)")
    parser.add_argument("--recv-kib", type=int, default=1024, help="the reader's recv_into buffer (default 1024 KiB)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode (default 3)")
    parser.add_argument("--dir", default="/var/tmp", help="where the file goes: on disk, not tmpfs (default /var/tmp)")
    parser.add_argument("--mode", action="append", choices=MODES, help="only this mode (repeatable; default sendfile and copy)")
    parser.add_argument("--keep", action="store_true", help="keep the file for the next run")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    try:
        result = measure(args.size_mib, args.chunk_mib, args.repeat, args.dir, args.keep, args.recv_kib,
                         tuple(args.mode or DEFAULT_MODES), progress=lambda m: print(f"loopback_limit: {m}", file=sys.stderr, flush=True))
    except (ValueError, OSError) as exc:
        print(f"loopback_limit: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        _print_human(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
