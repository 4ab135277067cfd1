"""The supervisor: forks the workers, restarts the ones that die, stops them all.

Boring on purpose (P11), after gunicorn's arbiter: synchronous, no asyncio, never on the
data path. Signal handlers only queue the signal and wake the main loop through a pipe;
the loop dispatches. It opens nothing stateful before forking (P12): the log-dir locks
and the IPC listening sockets are plain fds the workers inherit and never use for data.

Start:
    1. name the process; claim the log dirs (lock, meta.properties, clean-shutdown marker)
    2. write the topic registry from the partition dirs found if there is none yet
    3. create one IPC listening socket per worker slot, then fork the workers
Run: reap dead workers and respawn them with backoff; kill a worker whose heartbeat is
    stale (SIGABRT, then SIGKILL); a boot failure, or too many deaths within
    worker.restart.window.ms, stops the broker with a clear message and exit code 1.
Stop (SIGTERM/SIGINT):
    1. SIGTERM every worker (each stops accepting, finishes in-flight requests, closes logs)
    2. wait up to graceful.shutdown.timeout.ms (+5 s), then SIGKILL the stragglers; reap
    3. if every worker exited 0, write the clean-shutdown markers; release the locks; exit 0
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field

from broker.config import BrokerConfig
from broker.coordinator_main import make_coordinator_listener
from broker.handoff import make_handoff_socket
from broker.ipc import make_listener
from broker.worker_listeners import bind_worker_listeners
from storage.manager import ClaimedDirs, ManagerConfig, claim_log_dirs, mark_clean_shutdown

log = logging.getLogger(__name__)

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP)
ABORT_GRACE = 5.0  # seconds a worker killed for a stale heartbeat has to die of SIGABRT before SIGKILL


@dataclass
class WorkerSlot:
    index: int
    pid: int = 0
    spawned_at: float = 0.0
    deaths: list[float] = field(default_factory=list)
    respawn_at: float = 0.0
    aborted_at: float = 0.0  # when a stale heartbeat got it SIGABRT (monotonic), 0 if not

    @property
    def name(self) -> str:
        return "coordinator" if self.index == COORDINATOR else f"worker {self.index}"


COORDINATOR = -1  # the index of the coordinator process's slot


class Supervisor:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.count = config.workers
        self.slots = [WorkerSlot(i) for i in range(self.count)]
        self.coordinator_slot = WorkerSlot(COORDINATOR)
        self.coordinator_listener: socket.socket | None = None
        self.signals: list[int] = []
        self.stopping = False
        self.exit_code = 0
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.claimed: ClaimedDirs | None = None
        self.run_dir = ""
        self._own_run_dir = False
        self.ipc_listeners: list[socket.socket] = []
        self.handoff_sockets: list[socket.socket] = []
        self.worker_listeners: list[socket.socket] = []
        self.clean_start = False

    # ------------------------------------------------------------------ start
    def run(self) -> int:
        from setproctitle import setproctitle

        setproctitle(f"castle[{self.config.node_id}]: supervisor")
        settings = self.config.storage_settings()
        if self.config["cluster.id"]:
            settings["cluster.id"] = self.config["cluster.id"]
        try:
            ensure_port_free(*self.config.listener)
            self.worker_listeners = bind_worker_listeners(self.config)
            if self.config["zookeeper.connect"]:
                settings["cluster.id"] = self._cluster_id_from_zookeeper(str(self.config["cluster.id"]))
            self.claimed = claim_log_dirs(ManagerConfig.from_broker_config(settings))
        except Exception as exc:
            log.error("cannot start: %s", exc)
            return 1
        try:
            self._adopt_existing_partitions()
            self._make_run_dir()
            for signum in HANDLED_SIGNALS:
                signal.signal(signum, self._queue_signal)
            self.clean_start = self.claimed.clean_shutdown
            from broker import dispatch

            dispatch.load_all()  # import the protocol once here: every fork starts faster
            log.info("supervisor pid %d starting %d workers on %s (own ports %s; log dirs %s, %s start)", os.getpid(),
                     self.count, self.config.listener, ",".join(map(str, self.config.worker_ports)) or "off",
                     ",".join(self.claimed.paths), "clean" if self.clean_start else "recovering")
            for slot in self.slots:
                self._spawn(slot, clean_shutdown=self.clean_start)
            self._spawn(self.coordinator_slot, clean_shutdown=True)
            self._main_loop()
            return self.exit_code
        finally:
            self._cleanup()

    def _cluster_id_from_zookeeper(self, configured: str) -> str:
        """The cluster id in /cluster/id, created by the first broker (with the id of its
        meta.properties, cluster.id, or a new one), as Kafka's ZooKeeper mode does; the log
        dirs' meta.properties must then agree. A short-lived session, closed before any
        fork (P12)."""
        import base64
        import uuid

        from coordination.zookeeper import ZooKeeperBackend
        from storage.checkpoint import read_meta_properties

        proposed = configured
        for path in self.config.log_dirs:
            meta = read_meta_properties(path) if os.path.isdir(path) else None
            if meta and meta.get("cluster.id"):
                proposed = proposed or meta["cluster.id"]
        proposed = proposed or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        backend = ZooKeeperBackend(str(self.config["zookeeper.connect"]), self.config.node_id,
                                   session_timeout=int(self.config["zookeeper.session.timeout.ms"]) / 1000)
        try:
            backend.start(int(self.config["zookeeper.connection.timeout.ms"]) / 1000)
            return backend.cluster_id(proposed)
        finally:
            backend.close()

    def _adopt_existing_partitions(self) -> None:
        """First start on dirs written without a registry: register the topics found."""
        from coordination.local_topics import LocalTopicRegistry
        from storage.checkpoint import read_partition_metadata
        from storage.types import TopicPartition

        assert self.claimed is not None
        if self.config["zookeeper.connect"]:
            return  # the cluster's topics are in ZooKeeper
        registry = LocalTopicRegistry(self.claimed.paths[0])
        if registry.exists():
            return
        found: dict[str, tuple[int, object]] = {}
        for path in self.claimed.paths:
            for name in os.listdir(path):
                full = os.path.join(path, name)
                if not os.path.isdir(full):
                    continue
                try:
                    tp = TopicPartition.from_dir_name(name)
                except ValueError:
                    continue
                count, topic_id = found.get(tp.topic, (0, None))
                found[tp.topic] = (max(count, tp.partition + 1), topic_id or read_partition_metadata(full))
        for topic, (count, topic_id) in sorted(found.items()):
            registry.create(topic, count, {}, topic_id=topic_id)  # type: ignore[arg-type]
        if not found:
            registry.allocate_producer_ids(0)  # creates the file

    def _make_run_dir(self) -> None:
        if self.config["run.dir"]:
            self.run_dir = os.path.abspath(self.config["run.dir"])
            os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        else:
            self.run_dir = tempfile.mkdtemp(prefix=f"castle-{self.config.node_id}-")
            self._own_run_dir = True
        self.ipc_listeners = [make_listener(self.run_dir, i) for i in range(self.count)]
        self.handoff_sockets = [make_handoff_socket(self.run_dir, i) for i in range(self.count)]
        self.coordinator_listener = make_coordinator_listener(self.run_dir)

    @property
    def all_slots(self) -> list[WorkerSlot]:
        return [*self.slots, self.coordinator_slot]

    def _heartbeat_path(self, index: int) -> str:
        if index == COORDINATOR:
            return os.path.join(self.run_dir, "coordinator.heartbeat")
        return os.path.join(self.run_dir, f"worker-{index}.heartbeat")

    # ------------------------------------------------------------------ workers
    def _spawn(self, slot: WorkerSlot, clean_shutdown: bool) -> None:
        heartbeat = self._heartbeat_path(slot.index)
        with open(heartbeat, "wb"):
            pass
        os.utime(heartbeat, (0, 0))  # the worker's first beat arms the heartbeat check
        assert self.claimed is not None
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                for signum in HANDLED_SIGNALS:
                    signal.signal(signum, signal.SIG_DFL)
                os.close(self._wake_r)
                os.close(self._wake_w)
                for i, (listener, handoff) in enumerate(zip(self.ipc_listeners, self.handoff_sockets)):
                    if i != slot.index:
                        listener.close()
                        handoff.close()
                own_listener = None
                for i, client_listener in enumerate(self.worker_listeners):
                    if i == slot.index:
                        own_listener = client_listener
                    else:
                        client_listener.close()
                assert self.coordinator_listener is not None
                if slot.index == COORDINATOR:
                    from broker.coordinator_main import run_coordinator

                    code = run_coordinator(self.config, self.count, self.run_dir, self.coordinator_listener, heartbeat,
                                           self.claimed.cluster_id)
                    return
                self.coordinator_listener.close()
                from broker.worker import run_worker

                code = run_worker(self.config, slot.index, self.count, self.run_dir, self.claimed.cluster_id,
                                  clean_shutdown, self.ipc_listeners[slot.index], self.handoff_sockets[slot.index],
                                  heartbeat, own_listener)
            except BaseException:
                log.exception("%s crashed", slot.name)
            finally:
                logging.shutdown()
                os._exit(code)
        slot.pid = pid
        slot.aborted_at = 0.0
        slot.spawned_at = time.monotonic()
        log.info("spawned %s (pid %d)", slot.name, pid)

    def _queue_signal(self, signum: int, _frame: object) -> None:
        # A signal handler must not log or do work: queue and wake the loop.
        self.signals.append(signum)
        try:
            os.write(self._wake_w, b"!")
        except OSError:
            pass

    def _main_loop(self) -> None:
        while True:
            while self.signals:
                signum = self.signals.pop(0)
                if signum in (signal.SIGTERM, signal.SIGINT):
                    log.info("received %s: stopping gracefully", signal.Signals(signum).name)
                    self._stop()
                    return
                if signum == signal.SIGHUP:
                    log.info("SIGHUP: nothing to reload yet")
            self._reap()
            if self.stopping:
                self._stop()
                return
            self._respawn_due()
            self._check_heartbeats()
            try:
                select.select([self._wake_r], [], [], 0.5)
                os.read(self._wake_r, 4096)
            except (BlockingIOError, InterruptedError):
                pass

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for slot in self.all_slots:
                if slot.pid == pid:
                    self._worker_exited(slot, status)

    def _worker_exited(self, slot: WorkerSlot, status: int) -> None:
        from broker.worker import BOOT_ERROR

        slot.pid = 0
        code = os.waitstatus_to_exitcode(status)
        if self.stopping:
            return
        log.error("%s exited with %s", slot.name, f"signal {-code}" if code < 0 else f"code {code}")
        if code == BOOT_ERROR:
            log.error("%s could not boot: stopping the broker", slot.name)
            self.exit_code = 1
            self.stopping = True
            return
        now = time.monotonic()
        window = int(self.config["worker.restart.window.ms"]) / 1000
        slot.deaths = [t for t in slot.deaths if now - t < window] + [now]
        if len(slot.deaths) > int(self.config["worker.restart.max"]):
            log.error("%s died %d times within %.0f s: crash loop, stopping the broker",
                      slot.name, len(slot.deaths), window)
            self.exit_code = 1
            self.stopping = True
            return
        slot.respawn_at = now + min(5.0, 0.1 * 2 ** (len(slot.deaths) - 1))

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot in self.all_slots:
            if slot.pid == 0 and slot.respawn_at and now >= slot.respawn_at:
                slot.respawn_at = 0.0
                # Its partitions were not closed cleanly: recover them.
                self._spawn(slot, clean_shutdown=False)

    def _check_heartbeats(self) -> None:
        now = time.time()
        for slot in self.all_slots:
            if not slot.pid:
                continue
            key = "coordinator.heartbeat.timeout.ms" if slot.index == COORDINATOR else "worker.heartbeat.timeout.ms"
            timeout = int(self.config[key]) / 1000
            if slot.aborted_at:
                # SIGABRT does not end a stopped process, nor one that handles or blocks it.
                if time.monotonic() - slot.aborted_at > ABORT_GRACE:
                    log.error("%s (pid %d) outlived SIGABRT: SIGKILL", slot.name, slot.pid)
                    self._kill(slot.pid, signal.SIGKILL)
                    slot.aborted_at = 0.0
                continue
            try:
                last = os.stat(self._heartbeat_path(slot.index)).st_mtime
            except FileNotFoundError:
                continue
            if last and now - last > timeout:
                log.error("%s (pid %d) missed its heartbeat for %.0f s: killing it", slot.name, slot.pid, now - last)
                self._kill(slot.pid, signal.SIGABRT)
                slot.aborted_at = time.monotonic()
                os.utime(self._heartbeat_path(slot.index), (0, 0))

    def _kill(self, pid: int, signum: int) -> None:
        try:
            os.kill(pid, signum)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise

    # ------------------------------------------------------------------ stop
    def _stop(self) -> None:
        self.stopping = True
        statuses: dict[int, int] = {}
        for slot in self.all_slots:
            if slot.pid:
                self._kill(slot.pid, signal.SIGTERM)
        deadline = time.monotonic() + int(self.config["graceful.shutdown.timeout.ms"]) / 1000 + 5
        alive = {slot.pid: slot for slot in self.all_slots if slot.pid}
        while alive and time.monotonic() < deadline:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.05)
                continue
            if pid in alive:
                statuses[pid] = os.waitstatus_to_exitcode(status)
                alive.pop(pid).pid = 0
        for pid in alive:
            log.error("worker pid %d did not stop in time: SIGKILL", pid)
            self._kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            statuses[pid] = -9
        clean = not alive and all(code == 0 for code in statuses.values()) and self.exit_code == 0
        if clean and self.claimed is not None:
            mark_clean_shutdown(self.claimed.paths)
        log.info("supervisor stopped (%s)", "clean" if clean else "unclean: the next start recovers")

    def _cleanup(self) -> None:
        for listener in [*self.ipc_listeners, *self.handoff_sockets, *self.worker_listeners, self.coordinator_listener]:
            if listener is not None:
                listener.close()
        if self.run_dir and self._own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if self.claimed is not None:
            self.claimed.release()


def serve(config: BrokerConfig) -> int:
    from broker.worker import configure_logging

    configure_logging(str(config["log.level"]))
    if sys.platform != "linux":
        log.error("castle serve needs Linux (SO_REUSEPORT load balancing, sendfile)")
        return 1
    raise_open_files_limit()
    return Supervisor(config).run()


def ensure_port_free(host: str, port: int) -> None:
    """Refuse to start on a port another process listens on.

    Workers bind with SO_REUSEPORT, which lets any socket of the same user that also sets
    it join the port: a second broker started on the same address would silently get half
    of the connections (found when a forgotten benchmark broker answered with another
    cluster id). A bind without SO_REUSEPORT fails on a port anyone listens on, so one
    such bind, released at once, tells. (A process that binds in the instant before the
    workers do is not caught; the data-dir lock still keeps two brokers off one log.)
    """
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are fine
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {host}:{port}: {exc.strerror} (is another broker running there?)") from None


def raise_open_files_limit() -> None:
    """Every connection and every open segment, index and map takes a descriptor; the
    soft limit (often 1024) would cap a broker at a few hundred clients while the hard
    limit allows far more. Raise soft to hard, as Kafka's packaging does with
    LimitNOFILE; workers inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open files limit from %d to %d: %s", soft, hard, exc)
            return
    log.info("open files limit: %d", hard)
