"""A log dir that fails with a real I/O error (a 1 MiB tmpfs in a mount namespace of its
own: the first append there cannot reserve its segment's space, ENOSPC) goes offline as a
whole: its logs refuse reads, writes and flushes with LogDirOfflineError, the other dir's
logs carry on, new logs go to the online dir only, and a clean close marks only the online
dir clean (the failed one is recovered at the next start)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import os, sys
    from storage import files
    from storage.config import LogConfig
    from storage.errors import LogDirOfflineError
    from storage.manager import LogManager, ManagerConfig
    from storage.types import TopicPartition
    from tests.unit.storage.helpers import batch, read_all

    good, tiny = sys.argv[1], sys.argv[2]
    manager = LogManager(ManagerConfig(log_dirs=(good, tiny), node_id=1), LogConfig()).open()
    kept, doomed, other = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    manager.create_log(kept).append(batch(count=3))
    manager.create_log(doomed)
    assert manager.log_dir_of(doomed) == tiny, manager.log_dir_of(doomed)
    try:
        manager.get_log(doomed).append(batch(count=3))
        raise SystemExit("the append to the full tmpfs did not fail")
    except LogDirOfflineError as exc:
        assert manager.fail_dir(manager.log_dir_of(doomed), str(exc)) is True
    assert manager.fail_dir(manager.log_dir_of(doomed), "again") is False  # once
    assert manager.offline_dirs == {tiny}
    doomed_log = manager.get_log(doomed)
    for attempt in (lambda: doomed_log.append(batch(count=1)), lambda: doomed_log.read(0, 1024),
                    doomed_log.flush):
        try:
            attempt()
            raise SystemExit("an offline log served")
        except LogDirOfflineError:
            pass
    manager.get_log(kept).append(batch(count=2))
    assert len(read_all(manager.get_log(kept))) == 5
    assert manager.log_dir_of(manager.create_log(other).tp) == good  # never on the failed dir
    manager.flush_due(now=2**62)  # skips the offline log
    manager.run_due_tasks(now=2**62)
    manager.close()
    assert os.path.exists(os.path.join(good, files.CLEAN_SHUTDOWN_FILE))
    assert not os.path.exists(os.path.join(tiny, files.CLEAN_SHUTDOWN_FILE))
    print("ok")
''')


def test_a_full_dir_goes_offline_alone(tmp_path):
    _run_beside_a_tiny_tmpfs(tmp_path, SCRIPT)


def _run_beside_a_tiny_tmpfs(tmp_path, script):
    """Run ``script`` with the dirs good and tiny as arguments, a 1 MiB tmpfs mounted on tiny in
    a mount namespace of its own; it must print "ok"."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs in a mount namespace needs root")
    good, tiny = tmp_path / "good", tmp_path / "tiny"
    good.mkdir()
    tiny.mkdir()
    mount = 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"'
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, str(tiny),
                           sys.executable, "-c", script, str(good), str(tiny)],
                          capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


CHECKPOINT_SCRIPT = textwrap.dedent('''
    import os, sys
    from storage.config import LogConfig
    from storage.manager import LogManager, ManagerConfig
    from storage.releaser import RELEASER
    from storage.types import TopicPartition

    good, tiny = sys.argv[1], sys.argv[2]
    manager = LogManager(ManagerConfig(log_dirs=(good, tiny), node_id=1), LogConfig()).open()
    told = []
    manager.on_dir_failed = told.append
    manager.create_log(TopicPartition("a", 0))
    manager.create_log(TopicPartition("a", 1))
    assert {manager.log_dir_of(TopicPartition("a", p)) for p in (0, 1)} == {good, tiny}
    with open(os.path.join(tiny, "filler"), "wb") as filler:  # the disk fills up
        try:
            while True:
                filler.write(b"x" * 65536)
                filler.flush()
        except OSError:
            pass
    manager.checkpoint_high_watermarks(in_background=True)
    assert RELEASER.drain()
    assert manager.offline_dirs == {tiny}, manager.offline_dirs
    assert told == [tiny], told
    manager.checkpoint_high_watermarks(in_background=True)  # the good dir's goes on; no second report
    assert RELEASER.drain()
    assert told == [tiny] and os.path.exists(os.path.join(good, "replication-offset-checkpoint"))
    print("ok")
''')


def test_a_checkpoint_the_full_dir_refuses_fails_it_and_tells_the_owner(tmp_path):
    _run_beside_a_tiny_tmpfs(tmp_path, CHECKPOINT_SCRIPT)
