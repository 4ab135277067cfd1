"""loadtest.micro.produce_cost builds a real Produce of every version it is asked for and times
the worker's codec steps on it, both ways."""

from __future__ import annotations

import pytest

from broker.protocol import codec
from loadtest.micro import produce_cost


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_the_request_round_trips_through_kio_with_every_partition(version: int) -> None:
    request = produce_cost.kio_produce_request(version, 7)
    decoded = codec.decode_request(0, version, codec.encode_body(request), 0)
    assert [p.index for p in decoded.topic_data[0].partition_data] == list(range(7))


def test_measure_reports_each_step_in_seconds_per_request(capsys: pytest.CaptureFixture[str]) -> None:
    figures = produce_cost.measure(partitions=20, version=9, rounds=3)
    assert set(figures) == {"decode", "kio_decode", "encode", "kio_encode"}
    assert all(0 < seconds < 1 for seconds in figures.values())
    assert produce_cost.main(["--partitions", "5", "--rounds", "2"]) == 0
    assert "µs per partition" in capsys.readouterr().out
