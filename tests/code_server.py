"""A Dagster code server for tests, started as the Helm chart and the Dockerfile start it (`dagster api grpc -h HOST
-p PORT -m rag_pipelines -a defs --location-name rag`) in a process of its own, and stopped at the end."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from postgres_server import _free_port

LOCATION = ["-m", "rag_pipelines", "-a", "defs", "--location-name", "rag"]


@contextmanager
def code_server(env: dict, log: Path, args: list[str] = LOCATION) -> Iterator[int]:
    """Serve the code location on a free localhost port (the entry point pip installs, as in the image); its port."""
    from dagster._grpc.client import DagsterGrpcClient

    port = _free_port()
    command = [str(Path(sys.executable).parent / "dagster"), "api", "grpc", "-h", "127.0.0.1", "-p", str(port), *args]
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=out)
    try:
        wait_until_serving(DagsterGrpcClient(port=port, host="127.0.0.1"), server, log)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_until_serving(client, server: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the code server exited:\n{log.read_text(errors='replace')[-3000:]}"
        try:
            if client.health_check_query() == "SERVING":
                return
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.2)
    raise AssertionError(f"the code server did not answer in {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")
