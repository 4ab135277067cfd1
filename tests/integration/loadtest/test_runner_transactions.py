"""The workload runner measuring transactions, end to end against a real Castle: a
transactional producer committing every 100 ms whose records are read back by a
read_committed consumer, beside an idempotent producer in the same invocation, and the
goal that judges the one against the other."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.loadtest.test_runner import REPO, _load

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.timeout(240)]

SETTINGS = {"workers": 2, "transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}

COMMON = """
description = "test"
topics = 1
partitions_per_topic = 2
record_size = 256
producers = 1
rate = 2000
acks = "all"
linger_ms = 2
duration_s = 3
warmup_s = 1
"""

TXN = 'name = "txn"' + COMMON + """
transactional = true
transaction_interval_ms = 100
consumers = 1
read_after_write = true
isolation_level = "read_committed"

[[goals]]
figure = "publish_records_per_s"
against_workload = "idem"
at_least = 0.5
why = "both hold the rate"
"""

IDEM = 'name = "idem"' + COMMON + """
idempotent = true
consumers = 0
"""


@pytest.mark.parametrize("broker", [SETTINGS], indirect=True)
def test_a_transactional_run_counts_committed_records_and_is_judged_against_the_idempotent_one(broker, tmp_path):
    (tmp_path / "txn.toml").write_text(TXN)
    (tmp_path / "idem.toml").write_text(IDEM)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "loadtest.runner", str(tmp_path / "txn.toml"), str(tmp_path / "idem.toml"),
                           "--bootstrap", broker.bootstrap, "--broker-pid", str(broker.pid), "--out", str(out),
                           "--no-limits", "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    txn = _load(out, "txn-castle-r1")
    publish = txn["publish"]
    # Every record counted was committed: the producer's total is its committed total, in
    # transactions of ~100 ms over ~4 s of producing, none aborted.
    assert publish["committed_total"] == publish["acked_total"] > 0
    assert publish["errors"] == 0 and publish["aborted_records_total"] == 0 and publish["aborted_records"] == 0
    assert 10 <= publish["transactions_total"] <= 50, publish  # never more than one per 100 ms
    assert publish["transactions"] > 0 and 0 < publish["commit_ms_mean"] < 1000
    assert publish["records_per_s"] == pytest.approx(2000, rel=0.25)  # the workload's rate, counted at commit
    # The read_committed consumer read every committed record back (the commit markers
    # between them take offsets but are no records).
    consume = txn["consume"]
    assert consume["missing"] == 0 and consume["errors"] == 0, consume
    assert consume["consumed_total_per_group"] and all(
        n >= publish["committed_total"] for n in consume["consumed_total_per_group"].values())
    idem = _load(out, "idem-castle-r1")
    assert idem["publish"]["acked_total"] > 0 and idem["publish"]["errors"] == 0
    assert "transactions" not in idem["publish"] and "committed_total" not in idem["publish"]
    # The goal: the transactional rate over the idempotent one, both medians of this broker.
    summary = json.loads((out / "summary.json").read_text())
    medians = {name: entry["medians"]["castle"] for name, entry in summary["workloads"].items()}
    [goal] = summary["workloads"]["txn"]["goals"]
    assert goal["against_workload"] == "idem" and goal["verdict"] == "met"
    assert goal["value"] == round(medians["txn"]["publish_records_per_s"] / medians["idem"]["publish_records_per_s"], 3)
    assert medians["txn"]["publish_commit_ms_mean"] == publish["commit_ms_mean"]
    assert "goal txn: publish_records_per_s / idem's >= 0.5: " in done.stderr
    assert "| publish_records_per_s / idem's >= 0.5 |" in (out / "report.md").read_text()
