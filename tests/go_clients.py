"""Go clients (franz-go) as child processes, for tests against Castle.

The programs are the Go module in tests/go/ (its go.mod and go.sum pin franz-go); each
package under it is one program (groupconsumer: a consumer group member, the twin of
tests/java/castle/GroupConsumer.java). They are built ONCE per change of the sources, with
the machine's ``go`` and its module proxy settings, into
``~/.cache/castle-go-clients/<hash of the sources>/``, outside the repository.

    from tests.go_clients import start_go
    member = start_go("groupconsumer", ["bootstrap=127.0.0.1:9092", "group=g", "topics=t",
                                        "group.protocol=consumer"], log_dir=tmp_path)
    member.wait_for_line(r"^PROTOCOL consumer$", timeout=60); member.stop()  # SIGTERM, by PID

A test module that uses them asks for the ``go_present`` fixture: without ``go`` on PATH the
test is skipped, saying so.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.client_process import ClientProcess

SOURCES = Path(__file__).resolve().parent / "go"
BUILD_TIMEOUT = 600.0  # the first build downloads franz-go and compiles it on a small, busy machine


def go_binary() -> str | None:
    return shutil.which("go")


def cache_root() -> Path:
    return Path.home() / ".cache" / "castle-go-clients"


def _sources() -> list[Path]:
    return sorted(p for p in SOURCES.rglob("*") if p.is_file() and (p.suffix == ".go" or p.name in ("go.mod", "go.sum")))


def _build_environment() -> dict[str, str]:
    env = dict(os.environ)
    # go.sum pins every module; -mod=mod lets the build fetch them (through the machine's GOPROXY) into
    # the module cache on the first run instead of needing a vendor folder.
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    return env


def ensure_built() -> Path:
    """The directory holding one executable per program; built when the sources changed (a hash
    names it). A lock makes concurrent callers build once; the directory is filled under a
    temporary name and renamed, so a half-built one is never used."""
    go = go_binary()
    if go is None:
        raise RuntimeError("go is not on PATH")
    digest = hashlib.sha256()
    for source in _sources():
        digest.update(source.relative_to(SOURCES).as_posix().encode() + b"\0" + source.read_bytes() + b"\0")
    built = cache_root() / digest.hexdigest()[:16]
    if built.exists():
        return built
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".build-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built.exists():  # another process built while this one waited
            return built
        building = built.with_name(built.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        done = subprocess.run([go, "build", "-o", str(building) + "/", "./..."], cwd=SOURCES, capture_output=True,
                              text=True, timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL, env=_build_environment())
        if done.returncode != 0:
            raise RuntimeError(f"go build failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        building.rename(built)
    return built


def start_go(program: str, args: list[str], log_dir: Path, name: str | None = None) -> ClientProcess:
    """``program`` is a package under tests/go/; ``args`` its name=value words."""
    return ClientProcess([str(ensure_built() / program), *args], log_dir, name or program)


@pytest.fixture
def go_present() -> None:
    """Skips the test without ``go``; builds the programs here rather than inside a test's own waits."""
    if go_binary() is None:
        pytest.skip("go is not on PATH: the franz-go clients (tests/go/) cannot be built")
    ensure_built()
