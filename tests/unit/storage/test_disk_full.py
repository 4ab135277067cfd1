"""A full disk is an error on append (KAFKA_STORAGE_ERROR), never SIGBUS.

Uses a real 2 MiB tmpfs (the tests run as root in CI, per DEVELOPERS.md); the writer
runs in a child process so that a SIGBUS would show as its exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    from storage.config import LogConfig
    from storage.errors import LogDirOfflineError
    from storage.log import PartitionLog
    from storage.types import TopicPartition
    from tests.unit.storage.helpers import batch
    log = PartitionLog(sys.argv[1] + "/t-0", TopicPartition("t", 0),
                       LogConfig(segment_bytes=64 << 20, preallocate_window_bytes=256 << 10))
    appended = 0
    try:
        for _ in range(100_000):
            log.append(batch(count=1, value_size=8000))
            appended += 1
    except LogDirOfflineError as exc:
        print("offline", appended, log.log_end_offset, exc.kafka_error_code, flush=True)
        try:
            log.append(batch(count=1, value_size=8000))
        except LogDirOfflineError:
            print("still-offline", log.log_end_offset, flush=True)
    """
)


@pytest.fixture
def tiny_fs(tmp_path):
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


def test_full_disk_is_an_append_error_not_sigbus(tiny_fs):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_fs)], cwd=root, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0, f"writer died with {proc.returncode}: {proc.stderr[-2000:]}"
    lines = proc.stdout.split("\n")
    _word, appended, end, code = lines[0].split()
    assert int(appended) > 0 and int(end) == int(appended)  # a failed append wrote nothing
    assert int(code) == 56  # KAFKA_STORAGE_ERROR
    assert lines[1].split() == ["still-offline", end]


def test_a_full_disk_met_by_the_reserver_is_left_to_the_writer(tiny_fs, caplog):
    """The reserver thread asks for the next window and the disk has no room for it: the
    job fails quietly, nothing more is reserved, the writer keeps writing into what it has,
    and the append past that is the one that fails with LogDirOfflineError."""
    from storage.errors import LogDirOfflineError
    from storage.mmap_file import RESERVER, MappedFile

    mib = 1 << 20
    f = MappedFile(str(tiny_fs / "log"), 8 * mib, window=1536 << 10, length=0)  # 1.5 of 2 MiB
    try:
        f.write(b"a" * mib)  # past half the first window: the next 1.5 MiB is asked for
        assert RESERVER.drain(timeout_s=30)
        assert f._reserved == 1536 << 10  # the reserver met ENOSPC and reserved nothing
        assert "background file job" not in caplog.text  # an expected failure, not logged as a crash
        f.write(b"b" * (512 << 10))  # up to the end of what the writer reserved itself
        with pytest.raises(LogDirOfflineError):
            f.write(b"c" * (512 << 10))
        assert f.length == 1536 << 10
        with open(f.path, "rb") as handle:
            assert handle.read(1536 << 10) == b"a" * mib + b"b" * (512 << 10)
    finally:
        f.unmap_and_trim()
        os.close(f.fd)
