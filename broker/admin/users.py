"""``castle users list|set|delete``: SCRAM credentials.

Online (``--bootstrap-server``) through AdminClient's DescribeUserScramCredentials and
AlterUserScramCredentials, so it works against any Kafka broker; the client salts and
hashes the password (PBKDF2), the password itself never travels.

Offline (``--broker-config FILE``) for the first user before the first start, as Kafka's
``kafka-storage format --add-scram`` does: the credential is written straight into the
store the broker's config names (ZooKeeper's ``/config/users/<user>`` with
``zookeeper.connect``, else ``scram-credentials.json`` in the first log dir), with no broker
running. The password is read from stdin (``--password-stdin``) so it stays out of the
process list and the shell history.
"""

from __future__ import annotations

import sys
from typing import Any

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session, UsageError

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 8192  # Kafka's tools default to 4096; more costs an attacker more per guess


def read_password(from_stdin: bool) -> str:
    if not from_stdin:
        raise UsageError("give the password on stdin with --password-stdin")
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise UsageError("empty password on stdin")
    return password


def _mechanism(name: str) -> Any:
    return ScramMechanism.SCRAM_SHA_256 if name == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def list_users(session: Session, users: list[str]) -> Report:
    admin: Any = session.admin  # its stubs type the answer as one future or a dict of them
    if users:
        futures = admin.describe_user_scram_credentials(users, **session.request_options())
        described = {user: session.wait(future, f"user {user}") for user, future in futures.items()}
    else:
        described = session.wait(admin.describe_user_scram_credentials(None, **session.request_options()), "users")
    rows = []
    for user, description in sorted(described.items()):
        for info in description.scram_credential_infos:
            rows.append((user, info.mechanism.name.replace("_", "-"), info.iterations))
    data = [{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows]
    return Report(data, table(("USER", "MECHANISM", "ITERATIONS"), rows))


def set_user(session: Session, user: str, password: str, mechanisms: list[str], iterations: int) -> Report:
    alterations: list[UserScramCredentialAlteration] = [UserScramCredentialUpsertion(user, ScramCredentialInfo(_mechanism(m), iterations), password.encode())
                   for m in mechanisms]
    futures = session.admin.alter_user_scram_credentials(alterations, **session.request_options())
    for name, future in futures.items():
        session.wait(future, f"user {name}")
    return Report({"user": user, "mechanisms": mechanisms, "iterations": iterations},
                  f"set {', '.join(mechanisms)} credentials of {user} ({iterations} iterations)")


def delete_user(session: Session, user: str, mechanisms: list[str]) -> Report:
    deletions: list[UserScramCredentialAlteration] = [UserScramCredentialDeletion(user, _mechanism(m)) for m in mechanisms]
    futures = session.admin.alter_user_scram_credentials(deletions, **session.request_options())
    for name, future in futures.items():
        session.wait(future, f"user {name}")
    return Report({"user": user, "deleted": mechanisms}, f"deleted {', '.join(mechanisms)} credentials of {user}")


# ---------------------------------------------------------------------------- offline
def change_offline(config_path: str, overrides: list[str], user: str, mechanisms: list[str],
                   password: str | None, iterations: int) -> Report:
    """Write (password given) or delete the credentials in the store of the broker's config."""
    from broker.config import ConfigError, load_config, parse_overrides
    from broker.security.scram_credentials import from_password, to_kafka_string
    from coordination.open_backend import open_backend

    try:
        config = load_config(config_path, parse_overrides(overrides))
    except (ConfigError, OSError) as exc:
        raise UsageError(f"--broker-config {config_path}: {exc}") from None
    backend = open_backend(config.get_str("zookeeper.connect"), config.log_dirs[0], config.node_id,
                           config.get_int("zookeeper.session.timeout.ms") / 1000)
    try:
        backend.start(config.get_int("zookeeper.connection.timeout.ms") / 1000)
        store = backend.credentials()
        for mechanism in mechanisms:
            if password is not None:
                store.set(user, mechanism, to_kafka_string(from_password(mechanism, password, iterations)))
            elif not store.delete(user, mechanism):
                raise AdminError(f"user {user} has no {mechanism} credential")
    except (OSError, ValueError) as exc:
        raise AdminError(f"cannot write the credentials: {exc}") from None
    finally:
        backend.close()
    where = config.get_str("zookeeper.connect") or config.log_dirs[0]
    verb = "set" if password is not None else "deleted"
    return Report({"user": user, "mechanisms": mechanisms, "store": where},
                  f"{verb} {', '.join(mechanisms)} credentials of {user} in {where}")
