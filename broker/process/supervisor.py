"""The supervisor: forks the workers, restarts the ones that die, stops them all.

Boring on purpose (P11), after gunicorn's arbiter: synchronous, no asyncio, never on the
data path. Signal handlers only queue the signal and wake the main loop through a pipe;
the loop dispatches. It opens nothing stateful before forking (P12): the log-dir locks,
the shared-memory rings and their eventfd doorbells (broker/links/rings.py) are made once and
inherited by every child it forks, again after a death.

Start:
    1. name the process; claim the log dirs (lock, meta.properties, clean-shutdown marker)
    2. write the topic registry from the partition dirs found if there is none yet
    3. map the rings, then fork the workers and the coordinator process
Run: reap dead workers and respawn them with backoff; kill a worker whose heartbeat is
    stale (SIGABRT, then SIGKILL); a boot failure, or too many deaths within
    worker.restart.window.ms, stops the broker with a clear message and exit code 1.
Stop (SIGTERM/SIGINT):
    1. SIGTERM every worker (each stops accepting, finishes in-flight requests, closes logs)
    2. wait up to graceful.shutdown.timeout.ms (+5 s), then SIGKILL the stragglers; reap
    3. if every worker exited 0, write the clean-shutdown markers; release the locks; exit 0
systemd (Type=notify, broker/process/sd_notify.py; a no-op without NOTIFY_SOCKET): READY=1 once every
    worker has reported on the ready pipe that its logs are open and it accepts; STATUS= on
    transitions; STOPPING=1 when the stop begins; WATCHDOG=1 from this loop (WatchdogSec/2).
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
from typing import Any

from broker import logger_levels
from broker.config import BrokerConfig
from broker.links.rings import SharedRings
from broker.logger_levels import BrokerLoggers
from broker.network.tcp_bind import bind_exclusive
from broker.process import stop_signal
from broker.process.gc_freeze import freeze_long_lived
from broker.process.heartbeats import NEVER, Heartbeats
from broker.process.metrics import SupervisorMetrics, bind_metrics_listener, mark_process_dead, prepare_multiprocess_dir
from broker.process.reload import reload_in_supervisor
from broker.process.sd_notify import Notifier
from broker.quotas import connection_counts, mutation_buckets, replication_rates, shared_counters
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
    ready: bool = False  # this pid reported that it opened its logs and accepts clients

    @property
    def name(self) -> str:
        return "coordinator" if self.index == COORDINATOR else f"worker {self.index}"


COORDINATOR = -1  # the index of the coordinator process's slot


def private_run_dir(prefix: str) -> str:
    """A new private run dir, on a memory filesystem when the machine offers one
    ($XDG_RUNTIME_DIR, /dev/shm), else under the temporary dir. The workers store into
    their metrics files every second; on the data's ext4 a store into a page the kernel
    has just written back waits on the journal (8 pages: p90 1.3 ms, max 6.2 under
    replicated load, docs/BENCHMARKS.md), which a worker's loop then waits out."""
    for parent in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm"):
        if parent and os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK):
            try:
                return tempfile.mkdtemp(prefix=prefix, dir=parent)
            except OSError:
                continue  # full, or refused: the next place will do
    return tempfile.mkdtemp(prefix=prefix)


class Supervisor:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.count = config.workers
        self.slots = [WorkerSlot(i) for i in range(self.count)]
        self.coordinator_slot = WorkerSlot(COORDINATOR)
        # The shared-memory rings and doorbells between the workers and the coordinator
        # (broker/links/rings.py): made once, before the first fork, kept across restarts.
        self.rings: SharedRings | None = None
        self.heartbeats: Heartbeats | None = None
        self.signals: list[int] = []
        self.stopping = False
        self.exit_code = 0
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.claimed: ClaimedDirs | None = None
        self.run_dir = ""
        self._own_run_dir = False
        self.loggers: BrokerLoggers | None = None
        self.metrics_listener: socket.socket | None = None
        self.metrics = SupervisorMetrics()  # inert until the metrics dir exists (_make_run_dir)
        self.clean_start = False
        # systemd (Type=notify): only this process notifies; workers report readiness to
        # it through a pipe (one short line each, atomic below PIPE_BUF).
        self.notifier = Notifier.from_environment(unset=True)
        self._ready_r, self._ready_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._ready_buffer = b""
        self.announced_ready = False
        self._watchdog_every = (self.notifier.watchdog_interval() or 0.0) / 2
        self._next_watchdog = 0.0

    # ------------------------------------------------------------------ start
    def run(self) -> int:
        from setproctitle import setproctitle

        setproctitle(f"castle[{self.config.node_id}]: supervisor")
        settings = self.config.storage_settings()
        if self.config.get_str("cluster.id"):
            settings["cluster.id"] = self.config.get_str("cluster.id")
        try:
            # The client port stays held while the metrics port is bound, so that a metrics
            # port the OS picks (port 0) cannot be the client port. Released before the
            # workers bind it.
            held = [reserve_shared_port(listener.host, listener.port) for listener in self.config.listeners.bound]
            try:
                self.metrics_listener = self._bind_metrics()
            finally:
                for shared_port in held:
                    if shared_port is not None:
                        shared_port.close()
            if self.config.get_str("zookeeper.connect"):
                settings["cluster.id"] = self._cluster_id_from_zookeeper(self.config.get_str("cluster.id"))
            self.claimed = claim_log_dirs(ManagerConfig.from_broker_config(settings))
            if self.config.get_str("zookeeper.connect"):
                self._check_log_dirs(settings)
        except Exception as exc:
            log.error("cannot start: %s", exc)
            self.notifier.status(f"cannot start: {exc}")
            return 1
        try:
            self._adopt_existing_partitions()
            self._make_run_dir()
            for signum in HANDLED_SIGNALS:
                signal.signal(signum, self._queue_signal)
            self.clean_start = self.claimed.clean_shutdown
            from broker import apis

            apis.load_all()  # import the protocol once here: every fork starts faster
            freeze_long_lived()  # the children inherit it frozen: their collections skip it
            log.info("supervisor pid %d starting %d workers on %s (log dirs %s, %s start)", os.getpid(),
                     self.count, ",".join(str(listener) for listener in self.config.listeners.bound),
                     ",".join(self.claimed.paths), "clean" if self.clean_start else "recovering")
            self.notifier.status(f"starting {self.count} workers ({'clean start' if self.clean_start else 'recovering the logs'})")
            self._watchdog_ping()
            for slot in self.slots:
                self._spawn(slot, clean_shutdown=self.clean_start)
            self._spawn(self.coordinator_slot, clean_shutdown=True)
            self._main_loop()
            return self.exit_code
        finally:
            self._cleanup()

    def _bind_metrics(self) -> socket.socket | None:
        """The Prometheus endpoint's socket. A port named in the config must be ours; the
        default one may belong to another broker on this host (Kafka brokers on one host
        need only their own node.id, listeners and log.dirs): then this one serves none."""
        address = self.config.get_str("metrics.listener")
        try:
            return bind_metrics_listener(address)
        except OSError as exc:
            if "metrics.listener" in self.config.explicit or exc.errno != errno.EADDRINUSE:
                raise
            log.warning("%s; no Prometheus endpoint on this broker (set metrics.listener to give it one)", exc)
            return None

    def _cluster_id_from_zookeeper(self, configured: str) -> str:
        """The cluster id in /cluster/id, created by the first broker (with the id of its
        meta.properties, cluster.id, or a new one), as Kafka's ZooKeeper mode does; the log
        dirs' meta.properties must then agree. A short-lived session, closed before any
        fork (P12)."""
        import base64
        import uuid

        from coordination.open_backend import open_broker_backend
        from storage.checkpoint import read_meta_properties

        proposed = configured
        for path in self.config.log_dirs:
            meta = read_meta_properties(path) if os.path.isdir(path) else None
            if meta and meta.get("cluster.id"):
                proposed = proposed or meta["cluster.id"]
        proposed = proposed or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        backend = open_broker_backend(self.config)
        try:
            return backend.cluster_id(proposed)
        finally:
            backend.close()

    def _check_log_dirs(self, settings: dict[str, Any]) -> None:
        """A broker back with empty or other log dirs (a lost disk) leaves every ISR before
        any worker serves: its empty logs must never lead while an in-sync replica lives.
        A short-lived session, closed before any fork (P12)."""
        from coordination.open_backend import open_broker_backend
        from storage.config import LogConfig

        assert self.claimed is not None
        defaults = LogConfig.from_broker_config(settings)
        backend = open_broker_backend(self.config)
        try:
            backend.check_log_dirs(self.config.node_id, self.claimed.directory_ids,
                                   lambda configs: defaults.with_overrides(configs).unclean_leader_election_enable)
        finally:
            backend.close()

    def _adopt_existing_partitions(self) -> None:
        """First start on dirs written without a registry: register the topics found."""
        from coordination.local_topics import LocalTopicRegistry
        from storage.checkpoint import read_partition_metadata
        from storage.types import TopicPartition

        assert self.claimed is not None
        if self.config.get_str("zookeeper.connect"):
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
        if self.config.get_str("run.dir"):
            self.run_dir = os.path.abspath(self.config.get_str("run.dir"))
            os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        else:
            self.run_dir = private_run_dir(f"castle-{self.config.node_id}-")
            self._own_run_dir = True
        # Logger levels set at run time last until a restart, as in Kafka.
        logger_levels.clear(self.run_dir)
        self.loggers = BrokerLoggers(self.run_dir)
        self.loggers.start()
        self.rings = SharedRings(self.count, self.config.get_int("worker.ring.bytes"))
        self.heartbeats = Heartbeats(self.count)
        # The client quotas' shared measures (broker/quotas/shared_counters.py), inherited by every fork.
        shared_counters.prepare(self.count, self.config.get_int("quota.window.num"),
                                self.config.get_int("quota.window.size.seconds") * 1000)
        replication_rates.prepare(self.count, replication_rates.windows_of(self.config.get_int))
        mutation_buckets.prepare()  # controller_mutation_rate's buckets, one per broker
        # The connection counts and creation rates (broker/quotas/connection_counts.py), likewise.
        connection_counts.prepare(self.count, self.config.get_int("quota.window.num"),
                                  self.config.get_int("quota.window.size.seconds") * 1000)
        if self.metrics_listener is not None:
            # Before any fork: every process then writes its counters under <run.dir>/metrics.
            prepare_multiprocess_dir(self.run_dir)
            self.metrics = SupervisorMetrics()

    @property
    def all_slots(self) -> list[WorkerSlot]:
        return [*self.slots, self.coordinator_slot]

    # ------------------------------------------------------------------ workers
    def _spawn(self, slot: WorkerSlot, clean_shutdown: bool) -> None:
        assert self.claimed is not None and self.heartbeats is not None
        heartbeat = self.heartbeats.slot(slot.index)
        heartbeat.reset()  # the child's first beat arms the heartbeat check
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                for signum in HANDLED_SIGNALS:
                    # SIGHUP's default would kill a child that is still recovering its
                    # logs; ignored until its loop installs the reload handler.
                    signal.signal(signum, signal.SIG_IGN if signum == signal.SIGHUP else signal.SIG_DFL)
                stop_signal.remember_until_handled()  # a SIGTERM before the loop stops it cleanly
                os.close(self._wake_r)
                os.close(self._wake_w)
                os.close(self._ready_r)
                assert self.rings is not None
                if slot.index == COORDINATOR:
                    os.close(self._ready_w)
                    from broker.process.coordinator_main import run_coordinator

                    code = run_coordinator(self.config, self.count, self.run_dir, self.rings, heartbeat,
                                           self.claimed.cluster_id, self.metrics_listener)
                    return
                if self.metrics_listener is not None:
                    self.metrics_listener.close()  # served by the coordinator only
                from broker.process.worker import run_worker

                code = run_worker(self.config, slot.index, self.count, self.run_dir, self.claimed.cluster_id,
                                  clean_shutdown, self.rings, heartbeat, ready_fd=self._ready_w)
            except BaseException:
                log.exception("%s crashed", slot.name)
            finally:
                logging.shutdown()
                os._exit(code)
        slot.pid = pid
        slot.aborted_at = 0.0
        slot.ready = False
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
                    self._reload()
            self._reap()
            if self.stopping:
                self._stop()
                return
            self._respawn_due()
            self._check_heartbeats()
            self._watchdog_ping()
            try:
                select.select([self._wake_r, self._ready_r], [], [], self._loop_timeout())
                os.read(self._wake_r, 4096)
            except (BlockingIOError, InterruptedError):
                pass
            self._read_ready_reports()

    # ------------------------------------------------------------------ systemd
    def _serving_status(self) -> str:
        listeners = ",".join(f"{listener.host}:{listener.port}" for listener in self.config.listeners.bound)
        return f"serving on {listeners}, {self.count} workers"

    def _read_ready_reports(self) -> None:
        """Each worker writes "<index> <pid>" to the ready pipe once it has opened its logs
        and accepts on the client port. READY=1 goes to systemd when
        every current worker has reported; a report from a pid that is no longer the
        slot's (it died meanwhile) counts for nothing."""
        while True:
            try:
                chunk = os.read(self._ready_r, 4096)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                break
            self._ready_buffer += chunk
        *lines, self._ready_buffer = self._ready_buffer.split(b"\n")
        for line in lines:
            try:
                index, pid = (int(field) for field in line.split())
            except ValueError:
                log.warning("ignoring a malformed readiness report %r", line)
                continue
            for slot in self.slots:
                if slot.index == index and slot.pid == pid and not slot.ready:
                    slot.ready = True
                    if self.announced_ready and not self.stopping:
                        self.notifier.status(f"{self._serving_status()}; {slot.name} restarted (pid {pid})")
        if not self.announced_ready and not self.stopping and all(slot.ready for slot in self.slots):
            self.announced_ready = True
            status = self._serving_status()
            log.info("all %d workers serving: ready (%s)", self.count, status)
            self.notifier.ready(status)

    def _watchdog_ping(self) -> None:
        """WATCHDOG=1 at half of WatchdogSec, from this loop only: a wedged worker is the
        supervisor's to replace (heartbeats), so the pings stop only if the supervisor
        itself stops turning, and systemd then restarts the whole broker."""
        if self._watchdog_every and time.monotonic() >= self._next_watchdog:
            self.notifier.watchdog()
            self._next_watchdog = time.monotonic() + self._watchdog_every

    def _loop_timeout(self) -> float:
        if not self._watchdog_every:
            return 0.5
        return max(0.0, min(0.5, self._next_watchdog - time.monotonic()))

    def _reload(self) -> None:
        """SIGHUP: new dynamic settings for this process and every child (broker/process/reload.py)."""
        if reload_in_supervisor(self.config, self.run_dir) is None:
            self.notifier.status("SIGHUP: the configuration does not load; kept the running settings")
            return
        self.notifier.status(f"SIGHUP: reloaded; log.level={self.config.get_str('log.level')}")
        for slot in self.all_slots:
            if slot.pid:
                self._kill(slot.pid, signal.SIGHUP)

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
        from broker.process.worker import BOOT_ERROR

        if self.rings is not None:
            # Its peers fail their calls to it now (a retriable error), not at a timeout; and
            # new calls wait for its successor (or fail) rather than go to a dead ring.
            self.rings.mark_down(self.rings.coordinator if slot.index == COORDINATOR else slot.index)
        mark_process_dead(slot.pid)
        slot.pid = 0
        code = os.waitstatus_to_exitcode(status)
        if self.stopping:
            return
        how = f"signal {-code}" if code < 0 else f"code {code}"
        log.error("%s exited with %s", slot.name, how)
        if code == BOOT_ERROR:
            log.error("%s could not boot: stopping the broker", slot.name)
            self.notifier.status(f"{slot.name} could not boot: stopping")
            self.exit_code = 1
            self.stopping = True
            return
        now = time.monotonic()
        window = self.config.get_int("worker.restart.window.ms") / 1000
        slot.deaths = [t for t in slot.deaths if now - t < window] + [now]
        if len(slot.deaths) > self.config.get_int("worker.restart.max"):
            log.error("%s died %d times within %.0f s: crash loop, stopping the broker",
                      slot.name, len(slot.deaths), window)
            self.notifier.status(f"{slot.name} died {len(slot.deaths)} times within {window:.0f} s: stopping")
            self.exit_code = 1
            self.stopping = True
            return
        slot.respawn_at = now + min(5.0, 0.1 * 2 ** (len(slot.deaths) - 1))
        self.notifier.status(f"{slot.name} exited with {how}: restarting it")

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot in self.all_slots:
            if slot.pid == 0 and slot.respawn_at and now >= slot.respawn_at:
                slot.respawn_at = 0.0
                # Its partitions were not closed cleanly: recover them.
                self._spawn(slot, clean_shutdown=False)
                self.metrics.restarted(slot.name)

    def _check_heartbeats(self) -> None:
        now = time.monotonic()
        assert self.heartbeats is not None
        for slot in self.all_slots:
            if not slot.pid:
                continue
            timeout = (self.config.get_int("coordinator.heartbeat.timeout.ms") if slot.index == COORDINATOR
                       else self.config.get_int("worker.heartbeat.timeout.ms")) / 1000
            if slot.aborted_at:
                # SIGABRT does not end a stopped process, nor one that handles or blocks it.
                if time.monotonic() - slot.aborted_at > ABORT_GRACE:
                    log.error("%s (pid %d) outlived SIGABRT: SIGKILL", slot.name, slot.pid)
                    self._kill(slot.pid, signal.SIGKILL)
                    slot.aborted_at = 0.0
                continue
            heartbeat = self.heartbeats.slot(slot.index)
            last = heartbeat.last()
            if last != NEVER and now - last > timeout:
                log.error("%s (pid %d) missed its heartbeat for %.0f s: killing it", slot.name, slot.pid, now - last)
                self._kill(slot.pid, signal.SIGABRT)
                slot.aborted_at = time.monotonic()
                heartbeat.reset()

    def _kill(self, pid: int, signum: int) -> None:
        try:
            os.kill(pid, signum)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise

    # ------------------------------------------------------------------ stop
    def _stop(self) -> None:
        self.stopping = True
        self.notifier.stopping(f"stopping: draining {sum(1 for slot in self.slots if slot.pid)} workers")
        statuses: dict[int, int] = {}
        for slot in self.all_slots:
            if slot.pid:
                self._kill(slot.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.config.get_int("graceful.shutdown.timeout.ms") / 1000 + 5
        alive = {slot.pid: slot for slot in self.all_slots if slot.pid}
        while alive and time.monotonic() < deadline:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                self._watchdog_ping()
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
        self.notifier.status("stopped" if clean else "stopped uncleanly: the next start recovers")

    def _cleanup(self) -> None:
        if self.loggers is not None:
            self.loggers.close()
        if self.rings is not None:
            self.rings.close()
        for listener in [
                         self.metrics_listener]:
            if listener is not None:
                listener.close()
        if self.run_dir and self._own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if self.claimed is not None:
            self.claimed.release()
        self.notifier.close()


def serve(config: BrokerConfig) -> int:
    from broker.process.logs import configure_logging

    configure_logging(config.get_str("log.level"), config.get_str("log.format"))
    if sys.platform != "linux":
        log.error("castle serve needs Linux (SO_REUSEPORT load balancing, sendfile)")
        return 1
    raise_open_files_limit()
    return Supervisor(config).run()


def reserve_shared_port(host: str, port: int) -> socket.socket | None:
    """Refuse to start on a port another process listens on; else hold the port (the
    caller closes the socket before the workers bind).

    Workers bind with SO_REUSEPORT, which lets any socket of the same user that also sets
    it join the port: a second broker started on the same address would silently get half
    of the connections (found when a forgotten benchmark broker answered with another
    cluster id). A bind without SO_REUSEPORT fails on a port anyone listens on, so one
    such bind tells. (A process that binds in the instant between its release and the
    workers' binds is not caught; the data-dir lock still keeps two brokers off one log.)
    """
    if port == 0:
        return None
    try:
        held = bind_exclusive(host, port)
    except OSError as exc:
        raise RuntimeError(f"{exc.strerror} (is another broker running there?)") from None
    try:
        # Listening, because two SO_REUSEADDR sockets that only bind may share a port:
        # only a listener keeps every other bind off it. A client that connects in this
        # instant is reset when it closes, as it would be refused without it.
        held.listen(1)
        return held
    except OSError as exc:
        held.close()
        raise RuntimeError(f"{exc.strerror} (is another broker running there?)") from None


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
