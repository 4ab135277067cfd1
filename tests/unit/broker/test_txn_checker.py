"""tests/integration/txn_checker.py: a clean transactional history passes, and each kind of
violation is caught by a tiny hand-made history, its message naming the transaction and the
partitions."""

from __future__ import annotations

from tests.integration.txn_checker import ABORTED, COMMITTED, INDETERMINATE, Report, TxnHistory

A, B = ("txn", 0), ("txn", 1)
OUT_A, OUT_B = ("out", 0), ("out", 1)


def clean() -> TxnHistory:
    """Producer p0: t0 committed on both partitions, t1 aborted, t2 indeterminate and in the
    log on both; a consume-transform-produce transaction c0 that copied t0's two values with
    the offsets committed past them, and an aborted c1 that had copied them before."""
    h = TxnHistory()
    h.begin("p0-t0", {A: ["p0-t0-0"], B: ["p0-t0-1"]})
    h.end("p0-t0", COMMITTED)
    h.begin("p0-t1", {A: ["p0-t1-0"], B: ["p0-t1-1"]})
    h.end("p0-t1", ABORTED)
    h.begin("p0-t2", {A: ["p0-t2-0"], B: ["p0-t2-1"]})
    h.end("p0-t2", INDETERMINATE, "timed out")
    h.begin("c0", {OUT_A: ["c0|a0"], OUT_B: ["c0|b0"]},
            sources={"c0|a0": (A, 0, "p0-t0-0"), "c0|b0": (B, 0, "p0-t0-1")})
    h.end("c0", COMMITTED)
    h.begin("c1", {OUT_A: ["c1|a0"], OUT_B: ["c1|b0"]},
            sources={"c1|a0": (A, 0, "p0-t0-0"), "c1|b0": (B, 0, "p0-t0-1")})
    h.end("c1", ABORTED)
    # Offsets 1 and 3 hold the aborted data, 2 and 5 markers: read_committed skips them.
    h.final(A, [(0, "p0-t0-0"), (4, "p0-t2-0")], [(0, "p0-t0-0"), (1, "p0-t1-0"), (4, "p0-t2-0")])
    h.final(B, [(0, "p0-t0-1"), (4, "p0-t2-1")], [(0, "p0-t0-1"), (1, "p0-t1-1"), (4, "p0-t2-1")])
    h.final(OUT_A, [(2, "c0|a0")], [(0, "c1|a0"), (2, "c0|a0")])
    h.final(OUT_B, [(2, "c0|b0")], [(0, "c1|b0"), (2, "c0|b0")])
    h.offsets({A: 1, B: 1})
    return h


def only(report: Report, kind: str) -> list[str]:
    """The messages of the one violation kind that fired; fails if any other kind did too."""
    fired = [k for k in Report.KINDS if getattr(report, k)]
    assert fired == [kind], report.summary()
    assert kind in report.summary() and "VIOLATIONS" in report.summary()
    return [str(a) for a in getattr(report, kind)]


def test_a_clean_history_passes() -> None:
    report = clean().check()
    assert report.ok, report.summary()
    assert report.counts == {"committed": 2, "aborted": 2, "aborted_in_log": 2, "indeterminate": 1,
                             "indeterminate_visible": 1, "records": 6}
    assert report.resolved == ["p0-t2: visible (timed out)"]
    assert "p0-t2: visible (timed out)" in report.summary()


def test_an_indeterminate_transaction_may_be_absent_everywhere() -> None:
    h = clean()
    h.final(A, [(0, "p0-t0-0")])
    h.final(B, [(0, "p0-t0-1")])
    assert h.check().ok, h.check().summary()
    assert h.check().resolved == ["p0-t2: invisible (timed out)"]


def test_an_aborted_value_read_is_caught() -> None:
    h = clean()
    h.final(A, [(0, "p0-t0-0"), (1, "p0-t1-0"), (4, "p0-t2-0")])
    h.final(B, [(0, "p0-t0-1"), (1, "p0-t1-1"), (4, "p0-t2-1")])
    (message,) = only(h.check(), "aborted_read")
    assert message.startswith("p0-t1 on txn[0], txn[1]:") and "'p0-t1-1'@txn[1]" in message
    # Half of it read: aborted and not all-or-nothing.
    h.final(A, [(0, "p0-t0-0"), (4, "p0-t2-0")])
    report = h.check()
    assert [k for k in Report.KINDS if getattr(report, k)] == ["aborted_read", "partial"], report.summary()


def test_a_committed_value_missing_is_lost_and_the_transaction_partial() -> None:
    h = clean()
    h.final(A, [(4, "p0-t2-0")], [(0, "p0-t0-0"), (4, "p0-t2-0")])
    report = h.check()
    assert not report.ok
    fired = [k for k in Report.KINDS if getattr(report, k)]
    # The stage consumed it, and c0's copy of it is an output of an input no longer there, too.
    assert fired == ["lost", "partial", "unstable_read", "offsets"], report.summary()
    (lost,) = map(str, report.lost)
    assert lost.startswith("p0-t0 on txn[0]:") and "read_uncommitted has it" in lost
    (partial,) = map(str, report.partial)
    assert partial.startswith("p0-t0 on txn[0], txn[1]:") and "read from txn[1]" in partial


def test_an_indeterminate_transaction_half_visible_is_partial() -> None:
    h = clean()
    h.final(B, [(0, "p0-t0-1")])
    (message,) = only(h.check(), "partial")
    assert message.startswith("p0-t2 on txn[0], txn[1]:") and "indeterminate (timed out)" in message
    assert "read from txn[0]; missing 1 value(s) from txn[1]" in message


def test_a_value_read_twice_is_duplicated() -> None:
    h = clean()
    h.final(A, [(0, "p0-t0-0"), (1, "p0-t0-0"), (4, "p0-t2-0")])
    (message,) = only(h.check(), "duplicated")
    assert message.startswith("p0-t0 on txn[0], txn[0]:") and "txn[0]@0, txn[0]@1" in message
    # Read again after a later transaction of its producer: out of order too.
    h.final(A, [(0, "p0-t0-0"), (4, "p0-t2-0"), (6, "p0-t0-0")])
    report = h.check()
    assert [k for k in Report.KINDS if getattr(report, k)] == ["duplicated", "reordered"], report.summary()


def test_a_value_never_written_there_is_a_phantom() -> None:
    h = clean()
    h.final(A, [(0, "p0-t0-0"), (4, "p0-t2-0"), (7, "p0-t0-1")])  # B's value in A: also read twice
    report = h.check()
    assert [k for k in Report.KINDS if getattr(report, k)] == ["duplicated", "phantom"], report.summary()
    assert "never written there" in str(report.phantom[0]) and "txn[0]@7" in str(report.phantom[0])


def test_an_input_below_the_committed_offset_without_output_is_caught() -> None:
    h = clean()
    h.offsets({A: 5, B: 1})  # the group says A's input at 4 was consumed, but c1 (its output) aborted
    (message,) = only(h.check(), "offsets")
    assert "'p0-t2-0' at txn[0]@4 is below the committed offset 5 but has 0 outputs" in message


def test_an_output_at_or_above_the_committed_offset_is_caught() -> None:
    h = clean()
    h.offsets({A: 0, B: 1})  # c0's output of A@0 is committed, the offset is not
    (message,) = only(h.check(), "offsets")
    assert message.startswith("c0 on txn[0]:") and "at or above the committed offset 0" in message


def test_two_outputs_of_one_input_are_caught() -> None:
    h = clean()
    h.begin("c2", {OUT_A: ["c2|a0"]}, sources={"c2|a0": (A, 0, "p0-t0-0")})
    h.end("c2", COMMITTED)
    h.final(OUT_A, [(2, "c0|a0"), (3, "c2|a0")])
    (message,) = only(h.check(), "offsets")
    assert message.startswith("c0,c2 on txn[0]:") and "has 2 outputs" in message


def test_an_output_naming_another_input_value_is_caught() -> None:
    h = clean()
    h.txns["c0"].sources["c0|a0"] = (A, 0, "p9-t9-0")
    report = h.check()
    assert [k for k in Report.KINDS if getattr(report, k)] == ["unstable_read", "offsets"], report.summary()
    assert "names the input 'p9-t9-0' at txn[0]@0, where read_committed has 'p0-t0-0'" in str(report.offsets[0])


def test_the_stage_consuming_an_aborted_value_is_an_aborted_read() -> None:
    h = clean()
    h.begin("c2", {OUT_B: ["c2|b1"]}, sources={"c2|b1": (B, 1, "p0-t1-1")})
    h.end("c2", ABORTED)  # its own outcome does not matter: it saw aborted data
    (message,) = only(h.check(), "aborted_read")
    assert message.startswith("p0-t1 on txn[1]:") and "the stage consumed 'p0-t1-1' at txn[1]@1 (in c2)" in message


def test_the_stage_consuming_a_value_later_rolled_back_is_an_unstable_read() -> None:
    h = clean()
    h.begin("c2", {OUT_B: ["c2|b4"]}, sources={"c2|b4": (B, 4, "p0-t2-1")})
    h.end("c2", ABORTED)
    h.final(A, [(0, "p0-t0-0")])  # p0-t2 (indeterminate) finally absent: the stage read what was undone
    h.final(B, [(0, "p0-t0-1")])
    (message,) = only(h.check(), "unstable_read")
    assert message.startswith("c2 on txn[1]:") and "has it nowhere" in message


def test_a_transaction_begun_and_never_ended_counts_as_indeterminate() -> None:
    h = clean()
    h.begin("p1-t0", {A: ["p1-t0-0"], B: ["p1-t0-1"]})
    h.final(A, [(0, "p0-t0-0"), (4, "p0-t2-0"), (8, "p1-t0-0")])
    (message,) = only(h.check(), "partial")
    assert message.startswith("p1-t0 on txn[0], txn[1]: indeterminate")


def test_a_producers_transactions_read_out_of_order_are_reordered() -> None:
    h = clean()
    h.begin("p0-t3", {A: ["p0-t3-0"], B: ["p0-t3-1"]})
    h.end("p0-t3", COMMITTED)
    h.final(A, [(0, "p0-t0-0"), (4, "p0-t2-0"), (6, "p0-t3-0")])
    h.final(B, [(0, "p0-t0-1"), (2, "p0-t3-1"), (4, "p0-t2-1")])  # t3 before t2 on B
    (message,) = only(h.check(), "reordered")
    assert message.startswith("p0-t2 on txn[1]:") and "after p0-t3's value at @2, which p0 ran later" in message
