"""broker/network/segment_files.py: fds by (path, inode), an LRU bound, and the sweep that lets a
deleted file's blocks go."""

from __future__ import annotations

import os

from broker.network.segment_files import SegmentFiles
from storage.releaser import RELEASER


def _file(tmp_path, name: str, data: bytes = b"abc") -> tuple[str, int]:
    path = str(tmp_path / name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path, os.stat(path).st_ino


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def _open_paths() -> list[str]:
    """What this process's fds point at (a deleted file reads '... (deleted)')."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:  # the fd of the listing itself, closed by now
            pass
    return out


def test_dup_fd_reads_the_file_and_checks_its_inode(tmp_path):
    files = SegmentFiles()
    path, inode = _file(tmp_path, "a.log", b"hello")
    fd = files.dup_fd(path, inode)
    assert fd is not None and os.pread(fd, 5, 0) == b"hello"
    os.close(fd)
    assert files.dup_fd(path, inode + 1) is None  # replaced under the same name
    assert files.dup_fd(str(tmp_path / "missing.log"), 1) is None
    files.close()


def test_the_cache_is_bounded(tmp_path):
    files = SegmentFiles(capacity=2)
    before = _open_fds()
    for name in ("a", "b", "c"):
        path, inode = _file(tmp_path, name)
        os.close(files.dup_fd(path, inode))
    assert len(_open_fds() - before) == 2
    files.close()
    assert _open_fds() - before == set()


def test_sweep_closes_only_the_fds_of_deleted_files(tmp_path):
    files = SegmentFiles()
    kept, kept_inode = _file(tmp_path, "kept.log")
    renamed, renamed_inode = _file(tmp_path, "renamed.log")
    deleted, deleted_inode = _file(tmp_path, "deleted.log", b"x" * 65536)
    in_flight = None
    for path, inode in ((kept, kept_inode), (renamed, renamed_inode), (deleted, deleted_inode)):
        fd = files.dup_fd(path, inode)
        if path == deleted:
            in_flight = fd  # a response still sending from the deleted file keeps its own dup
        else:
            os.close(fd)
    os.rename(renamed, renamed + ".deleted")  # still has a name: its blocks are not lost
    os.unlink(deleted)
    assert files.sweep() == 1
    assert files.sweep() == 0
    assert os.pread(in_flight, 4, 0) == b"xxxx"
    os.close(in_flight)
    assert RELEASER.drain(timeout_s=10)  # the sweep's closes run on the releaser thread
    held = [p for p in _open_paths() if p.startswith(str(tmp_path))]
    assert sorted(held) == sorted([kept, renamed + ".deleted"])
    files.close()
