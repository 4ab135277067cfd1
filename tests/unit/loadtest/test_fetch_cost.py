"""loadtest.micro.fetch_cost builds a real Fetch of every version it is asked for and times the
worker's per-partition steps on it."""

from __future__ import annotations

import pytest

from broker.protocol import codec
from loadtest.micro import fetch_cost


@pytest.mark.parametrize("version", [4, 12, 13, 16])
def test_the_request_round_trips_through_the_codec_with_every_partition(version: int) -> None:
    request = fetch_cost.kio_fetch_request(version, 7, fetch_cost._Topic(7).topic_id)
    decoded = codec.decode_request(1, version, codec.encode_body(request), 0)
    assert [p.partition for p in decoded.topics[0].partitions] == list(range(7))


def test_measure_reports_each_step_in_seconds_per_request(capsys: pytest.CaptureFixture[str]) -> None:
    figures = fetch_cost.measure(partitions=20, version=12, rounds=3)
    assert set(figures) == {"decode", "kio_decode", "resolve", "watch", "respond"}
    assert all(0 < seconds < 1 for seconds in figures.values())
    assert "respond" not in fetch_cost.measure(partitions=3, version=16, rounds=1)  # v16 needs a cluster's endpoints
    assert fetch_cost.main(["--partitions", "5", "--rounds", "2"]) == 0
    assert "µs per partition" in capsys.readouterr().out
