"""loadtest.profiling.summary: shares of the event loop's samples from py-spy's raw (collapsed) format."""

from __future__ import annotations

from pathlib import Path

from loadtest.profiling import summary

MAIN = "<module> (castle:8);run_worker (broker/process/worker.py:64)"
HELPER = "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982);Condition.wait (threading.py:331)"


def test_only_the_main_thread_counts_and_the_loops_wait_is_idle(tmp_path: Path) -> None:
    path = tmp_path / "worker.txt"
    path.write_text("\n".join([
        f"{MAIN};handle_fetch (broker/apis/fetch.py:180);respond (broker/apis/fetch.py:230) 30",
        f"{MAIN};handle_fetch (broker/apis/fetch.py:180) 10",
        f"{MAIN};run_once (uvloop/loop.pyx:1) 60",
        f"{HELPER} 500",  # an idle helper thread: not the loop's time
    ]) + "\n")
    shares = summary(str(path))
    assert dict(shares["self"]) == {"<idle>": 60.0, "respond (broker/apis/fetch.py:230)": 30.0,
                                    "handle_fetch (broker/apis/fetch.py:180)": 10.0}
    assert dict(shares["total"])["handle_fetch (broker/apis/fetch.py:180)"] == 40.0
    assert not any("threading" in name for name, _share in shares["total"])
