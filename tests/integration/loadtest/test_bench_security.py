"""loadtest.bench_security against a real broker with its four security listeners, tiny
parameters: the JSON document has every listener's publish, consume and handshake figures,
each a positive number, the ratios to PLAINTEXT, the goals, the command line, the machine
and the date."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytestmark = [pytest.mark.integration, pytest.mark.security, pytest.mark.timeout(240)]

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PHASES = ("connect", "tls", "sasl", "sasl_client", "sasl_broker", "api_versions")


def positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def test_every_listener_is_measured_and_compared_with_plaintext() -> None:
    command = [sys.executable, "-m", "loadtest.bench_security", "--seconds", "0.3", "--warmup", "0.2",
               "--record-bytes", "512", "--workers", "1", "--connections", "8", "--json"]
    done = subprocess.run(command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=200)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    result = json.loads(done.stdout)

    assert result["command"][1:] == command[1:]
    assert result["date"] and positive(result["machine"]["cores"]) and result["machine"]["cpu_model"] is not None
    settings = result["settings"]
    assert (settings["record_bytes"], settings["workers"], settings["partitions"], settings["connections"]) == (512, 1, 1, 8)
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512" and positive(result["client_pbkdf2_ms"])

    assert set(result["listeners"]) == set(LISTENERS)
    for name in LISTENERS:
        row = result["listeners"][name]
        for what in ("publish", "consume"):
            for key in ("mib_per_s", "records_per_s", "records", "seconds"):
                assert positive(row[what][key]), (name, what, key, row[what])
            assert [r["round"] for r in row[what]["rounds"]] == [1]
        assert row["consume"]["records"] >= row["publish"]["records"]
        hs = row["handshake"]
        assert hs["connections"] == 8
        for key in ("p50_ms", "p99_ms", "mean_ms", "max_ms"):
            assert positive(hs[key]), (name, key, hs)
        assert hs["p50_ms"] <= hs["p99_ms"] <= hs["max_ms"]
        phases = hs["phases_p50_ms"]
        assert set(phases) == set(PHASES)
        for phase in ("connect", "api_versions"):
            assert positive(phases[phase]), (name, phase, phases)
        assert positive(phases["tls"]) == (name in ("SSL", "SASL_SSL")), (name, phases)
        assert positive(phases["sasl"]) == name.startswith("SASL"), (name, phases)
        if name.startswith("SASL"):
            assert positive(phases["sasl_client"]) and positive(phases["sasl_broker"]), (name, phases)
        if name in ("SSL", "SASL_SSL"):
            assert hs["tls_version"] in ("TLSv1.2", "TLSv1.3") and hs["cipher"]
        assert positive(result["handshake_ms"][name]["p50"]) and positive(result["handshake_ms"][name]["p99"])

    assert set(result["ratios"]) == {"SSL", "SASL_PLAINTEXT", "SASL_SSL"}
    for name, ratio in result["ratios"].items():
        for key in ("publish", "consume", "handshake_p50"):
            assert positive(ratio[key]), (name, key, ratio)
    assert set(result["goals"]) == {"sasl_plaintext_publish", "sasl_plaintext_consume", "ssl_publish", "ssl_consume"}
    for name, goal in result["goals"].items():
        assert positive(goal["value"]) and goal["goal"].startswith(">= ") and isinstance(goal["met"], bool), (name, goal)
