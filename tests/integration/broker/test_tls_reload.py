"""Certificates reload on SIGHUP: renewing the PEM files and signalling the broker changes
what new TLS connections are served with, in every worker, without a restart; a file that no
longer loads keeps the old certificate."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
from typing import Callable

import pytest

from tests.certs import make_pki
from tests.integration.conftest import Broker, free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.security]


def handshake(port: int, ca: str) -> bool:
    """True when a TLS handshake trusting ``ca`` succeeds with the broker's SSL listener."""
    context = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                return True
    except (ssl.SSLError, OSError):
        return False


def test_sighup_reloads_the_keystore_in_every_worker(broker_factory: Callable[..., Broker], tmp_path: str) -> None:
    old = make_pki(os.path.join(str(tmp_path), "old"), clients={})
    new = make_pki(os.path.join(str(tmp_path), "new"), clients={})
    keystore = os.path.join(str(tmp_path), "broker.pem")
    shutil.copy(old.server_keystore, keystore)
    broker = broker_factory(workers=2, start=False)
    tls_port = free_port()
    broker.overrides.update({"listeners": f"PLAINTEXT://{broker.bootstrap},SSL://127.0.0.1:{tls_port}",
                             "ssl.keystore.location": keystore})
    broker.start()
    # Several connections, so both workers (the kernel spreads them) are asked each time.
    assert all(handshake(tls_port, old.ca) for _ in range(8))
    assert not handshake(tls_port, new.ca)

    shutil.copy(new.server_keystore, keystore)
    os.kill(broker.pid, signal.SIGHUP)
    wait_until(lambda: all(handshake(tls_port, new.ca) for _ in range(8)), 20, "the new certificate served")
    assert not handshake(tls_port, old.ca)

    with open(keystore, "w") as handle:  # a broken renewal
        handle.write("not a certificate\n")
    os.kill(broker.pid, signal.SIGHUP)

    def refusals() -> int:
        with open(broker.stderr_path, encoding="utf-8", errors="replace") as err:
            return err.read().count("cannot reload its certificates")

    wait_until(lambda: refusals() >= 2, 20, "both workers refusing the broken file")
    assert all(handshake(tls_port, new.ca) for _ in range(8))
