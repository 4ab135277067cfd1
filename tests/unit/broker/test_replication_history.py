"""tests.integration.replication_history.py: a clean history passes, and each kind of
violation is caught by a tiny crafted history."""

from __future__ import annotations

import threading

from tests.integration.replication_history import History, Report

A = ("t", 0)
B = ("t", 1)


def clean() -> History:
    h = History()
    h.ack(A, "a0", 0)
    h.ack(A, "a1", 1)
    h.ack(B, 10, 0)
    h.read("r1", A, 0, "a0")
    h.read("r1", A, 1, "a1")
    h.read("r1", B, 0, 10)
    h.final(A, [(0, "a0"), (1, "a1")])
    h.final(B, [(0, 10)])
    return h


def only(report: Report, kind: str) -> list[object]:
    """The values of the one violation kind that fired; fails if any other kind did too."""
    fired = [k for k in Report.KINDS if getattr(report, k)]
    assert fired == [kind], report.summary()
    return [a.value for a in getattr(report, kind)]


def test_a_clean_history_passes() -> None:
    report = clean().check()
    assert report.ok, report.summary()
    assert (report.acked, report.failed, report.indeterminate, report.reads, report.final_records) == (3, 0, 0, 3, 3)
    assert report.summary().startswith("OK: acked=3")


def test_an_acked_value_missing_from_the_final_log_is_lost() -> None:
    h = clean()
    h.ack(A, "a2", 2)
    report = h.check()
    assert only(report, "lost") == ["a2"]
    assert not report.ok


def test_a_value_at_two_positions_of_the_final_log_is_duplicated() -> None:
    h = clean()
    h.final(A, [(0, "a0"), (1, "a1"), (2, "a1")])
    assert only(h.check(), "duplicated") == ["a1"]


def test_a_value_in_two_keys_is_duplicated_and_phantom_in_the_one_it_was_never_sent_to() -> None:
    h = clean()
    h.final(B, [(0, 10), (1, "a0")])
    report = h.check()
    assert [a.value for a in report.duplicated] == ["a0"]
    assert [(a.key, a.value) for a in report.phantom] == [(B, "a0")]


def test_an_acked_offset_that_changes_is_moved() -> None:
    h = clean()
    h.ack(A, "a2", 2)
    h.final(A, [(0, "a0"), (1, "a1"), (3, "a2")])  # a gap at 2 alone would be fine
    assert only(h.check(), "moved") == ["a2"]


def test_a_read_offset_that_differs_from_the_final_one_is_moved() -> None:
    h = clean()
    h.read("r2", A, 5, "a1")
    assert only(h.check(), "moved") == ["a1"]


def test_a_read_of_a_value_missing_from_the_final_log_is_an_uncommitted_read() -> None:
    h = clean()
    h.info(A, "a2")  # sent, timed out, read once, then truncated away
    h.read("r1", A, 2, "a2")
    assert only(h.check(), "uncommitted_reads") == ["a2"]


def test_a_value_never_sent_is_phantom_whether_read_or_in_the_final_log() -> None:
    h = clean()
    h.final(B, [(0, 10), (1, 99)])
    h.read("r1", B, 1, 99)
    assert only(h.check(), "phantom") == [99, 99]


def test_a_never_sent_value_read_and_then_gone_is_phantom_and_uncommitted() -> None:
    h = clean()
    h.read("r1", B, 1, "ghost")
    report = h.check()
    assert [a.value for a in report.phantom] == ["ghost"]
    assert [a.value for a in report.uncommitted_reads] == ["ghost"]


def test_a_reader_going_back_without_a_restart_is_nonmonotonic() -> None:
    h = clean()
    h.read("r1", A, 1, "a1")  # r1 already read offset 1 of A
    assert only(h.check(), "nonmonotonic") == ["a1"]


def test_offsets_of_other_keys_and_other_readers_are_independent() -> None:
    h = clean()  # r1 read A up to offset 1, then B at offset 0: another key, so fine
    h.read("r2", A, 0, "a0")  # another reader starts from its own position
    assert h.check().ok


def test_a_reader_restart_allows_going_back() -> None:
    h = clean()
    h.reader_restarted("r1")
    h.read("r1", A, 0, "a0")
    h.read("r1", B, 0, 10)
    report = h.check()
    assert report.ok, report.summary()


def test_a_restart_of_one_key_only_resets_that_key() -> None:
    h = clean()
    h.reader_restarted("r1", A)
    h.read("r1", A, 0, "a0")
    h.read("r1", B, 0, 10)
    assert only(h.check(), "nonmonotonic") == [10]


def test_a_definitely_failed_value_in_the_final_log_is_failed_but_present() -> None:
    h = clean()
    h.fail(A, "a2")
    h.final(A, [(0, "a0"), (1, "a1"), (2, "a2")])
    report = h.check()
    assert only(report, "failed_but_present") == ["a2"]
    assert report.failed == 1


def test_a_definitely_failed_value_absent_from_the_final_log_is_fine() -> None:
    h = clean()
    h.fail(A, "a2")
    assert h.check().ok


def test_indeterminate_values_may_be_present_or_absent() -> None:
    h = clean()
    h.info(A, "maybe-in")
    h.info(A, "maybe-out")
    h.final(A, [(0, "a0"), (1, "a1"), (2, "maybe-in")])
    h.read("r1", A, 2, "maybe-in")
    report = h.check()
    assert report.ok, report.summary()
    assert report.indeterminate == 2


def test_offset_gaps_are_not_flagged() -> None:
    h = History()
    h.ack(A, "x", 0)
    h.ack(A, "y", 7)  # e.g. after a control batch or compaction
    h.read("r", A, 0, "x")
    h.read("r", A, 7, "y")
    h.final(A, [(0, "x"), (7, "y")])
    assert h.check().ok


def test_summary_names_counts_and_examples() -> None:
    h = clean()
    for i in range(5):
        h.ack(A, f"gone{i}", 10 + i)
    text = h.check().summary(examples=2)
    assert text.startswith("VIOLATIONS: acked=8")
    assert "lost: 5" in text and "t[0] 'gone0'" in text and "... and 3 more" in text
    assert "gone4" not in text


def test_recording_from_many_threads_loses_nothing() -> None:
    h = History()
    n = 2000

    def send(start: int) -> None:
        for i in range(start, n, 4):
            h.ack(A, i, i)

    threads = [threading.Thread(target=send, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.final(A, [(i, i) for i in range(n)])
    report = h.check()
    assert report.ok and report.acked == n, report.summary()
