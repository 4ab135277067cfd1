"""The coordinator process's ZooKeeper session, kept where its successor finds it.

The coordinator process holds the broker's session: the broker's registration
(/brokers/ids/<id>) and, when elected, /consumers/coordinator are its ephemeral znodes.
When that process dies (kill -9, a crash, a heartbeat kill), the supervisor starts another
at once, which resumes the same session from ``<run.dir>/coordinator.zk-session`` (id and
password, written by the process whenever it has a new session): the registration never
disappears, so the broker never looks dead to the others, and the election is won again
with a new epoch at once instead of after the session timeout (18 s by default). When the
whole broker dies, nobody resumes it and the session ends after its timeout, as a Kafka
broker's does. A clean stop closes the session and removes the file.
"""

from __future__ import annotations

import os

from coordination.backend import SessionCredentials

SESSION_FILE = "coordinator.zk-session"


def _path(run_dir: str) -> str:
    return os.path.join(run_dir, SESSION_FILE)


def read_session(run_dir: str) -> SessionCredentials | None:
    try:
        with open(_path(run_dir), encoding="ascii") as handle:
            session_id, password = handle.read().split()
        return int(session_id), bytes.fromhex(password)
    except (FileNotFoundError, ValueError):
        return None


def keep_session(run_dir: str, credentials: SessionCredentials | None) -> None:
    """Write the credentials (owner-only: the password takes over the session)."""
    if credentials is None:
        return
    path = _path(run_dir)
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, f"{credentials[0]} {credentials[1].hex()}\n".encode("ascii"))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def forget_session(run_dir: str) -> None:
    try:
        os.unlink(_path(run_dir))
    except FileNotFoundError:
        pass
