"""coordination/file_poller.py: one thread runs every watch's check; a removed check never runs
again; a check that raises does not stop the others; the thread ends when nothing is watched;
a forked child inherits no checks; watched store files share the one thread."""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path

from coordination.credentials import LocalCredentials
from coordination.feature_store import LocalFeatures
from coordination.file_poller import INTERVAL, POLLER, FilePoller

WAIT = 10.0


def test_checks_run_on_one_thread_until_removed() -> None:
    poller = FilePoller()
    seen: queue.Queue[tuple[str, str]] = queue.Queue()
    first = poller.add(lambda: seen.put(("a", threading.current_thread().name)), "a")
    second = poller.add(lambda: seen.put(("b", threading.current_thread().name)), "b")
    got = {seen.get(timeout=WAIT), seen.get(timeout=WAIT)}
    assert got == {("a", "castle-file-watch"), ("b", "castle-file-watch")}
    thread = poller.thread
    assert thread is not None and thread.daemon

    poller.remove(first)
    while not seen.empty():
        seen.get_nowait()
    time.sleep(4 * INTERVAL)
    names = set()
    while not seen.empty():
        names.add(seen.get_nowait()[0])
    assert names == {"b"}  # "a" never ran after its removal returned

    poller.remove(second)
    thread.join(timeout=WAIT)
    assert not thread.is_alive() and poller.thread is None  # nothing watched: the thread is gone
    poller.add(lambda: seen.put(("c", "")), "c")  # and a new watch starts another
    assert seen.get(timeout=WAIT)[0] == "c"


def test_a_failing_check_is_logged_and_the_others_still_run(caplog: object) -> None:
    poller = FilePoller()
    runs: queue.Queue[str] = queue.Queue()

    def broken() -> None:
        runs.put("broken")
        raise OSError("disk gone")

    keys = [poller.add(broken, "broken file"), poller.add(lambda: runs.put("fine"), "fine")]
    seen = [runs.get(timeout=WAIT) for _ in range(4)]  # two rounds: the broken one runs again too
    assert seen.count("broken") == 2 and seen.count("fine") == 2
    for key in keys:
        poller.remove(key)
    assert "watch of broken file failed" in caplog.text  # type: ignore[attr-defined]


def test_a_check_may_remove_itself_and_a_later_one() -> None:
    poller = FilePoller()
    runs: list[str] = []
    keys: dict[str, int] = {}
    done = threading.Event()

    def first() -> None:
        runs.append("first")
        poller.remove(keys["first"])
        poller.remove(keys["second"])  # removed before its turn in this round: it never runs
        done.set()

    keys["first"] = poller.add(first, "first")
    keys["second"] = poller.add(lambda: runs.append("second"), "second")
    assert done.wait(WAIT)
    time.sleep(3 * INTERVAL)
    assert runs == ["first"]


def test_a_forked_child_inherits_no_checks() -> None:
    key = POLLER.add(lambda: None, "the parent's")
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it inherited, then leave at once
            os.write(write, f"{len(POLLER._checks)} {POLLER.thread is None}".encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            assert pipe.read() == "0 True"
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        POLLER.remove(key)


def test_two_watched_store_files_share_the_process_thread(tmp_path: Path) -> None:
    credentials = LocalCredentials(str(tmp_path))
    features = LocalFeatures(str(tmp_path))
    fired: queue.Queue[str] = queue.Queue()
    credentials.watch(lambda: fired.put("credentials"))
    features.watch(lambda: fired.put("features"))
    try:
        assert {fired.get(timeout=WAIT), fired.get(timeout=WAIT)} == {"credentials", "features"}  # the first calls
        assert credentials._file.thread is features._file.thread is POLLER.thread is not None
    finally:
        credentials.close()
        features.close()
