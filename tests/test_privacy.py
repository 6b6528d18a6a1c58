"""Nothing leaves the machine: no telemetry state, no name lookups or connections from a loaded embedder.

Each case runs a real entry point in a child process with a fresh HOME. The first version of
local-rag failed all of them: onnxruntime wrote ~/.cache/Microsoft/DeveloperTools/.onnxruntime/ and
looked up mobile.events.data.microsoft.com every 5–8 s.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HOLD_SECONDS = 9  # onnxruntime's telemetry looked names up every 5–8 s


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORT_", "DAGSTER_", "HF_", "DO_NOT"))}
    env.update(HOME=str(home), LOCAL_RAG_HOME=str(home / ".local-rag"), XDG_CACHE_HOME=str(home / ".cache"))
    return env


def _files_under(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())


def _telemetry_state(home: Path) -> list[str]:
    return [f for f in _files_under(home) if "Microsoft" in f or ".dagster/.telemetry" in f]


CLI_SEARCH = """
import sys
from click.testing import CliRunner
from rag_search.cli.main import cli
r = CliRunner().invoke(cli, ["search", "anything"])
print(r.output)
"""

HOLD_EMBEDDER = """
import time, sys
import rag_pipelines  # the Dagster code location's import path
from rag_search.embedders.builtin import BuiltinEmbedder
e = BuiltinEmbedder()
t = time.time()
while time.time() - t < float(sys.argv[1]):
    e.embed_query("keep the model busy")
    time.sleep(0.3)
print("held")
"""

ORT_FIRST = """
import onnxruntime
import rag_search
from rag_search.embedders.builtin import BuiltinEmbedder
from rag_search.errors import EmbedderError
try:
    BuiltinEmbedder().embed_query("x")
    print("loaded")
except EmbedderError as exc:
    print("refused:", exc)
"""


def test_cli_search_writes_no_telemetry_state(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run([sys.executable, "-c", CLI_SEARCH], env=_env(home), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert _telemetry_state(home) == []


def test_dagster_code_location_loads_with_telemetry_off(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    code = "import rag_pipelines, os; rag_pipelines.defs; print(os.environ['ORT_DISABLE_TELEMETRY'], os.environ['DAGSTER_DISABLE_TELEMETRY'])"
    out = subprocess.run([sys.executable, "-c", code], env=_env(home), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]
    assert _telemetry_state(home) == []


def test_onnxruntime_imported_first_is_refused(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run([sys.executable, "-c", ORT_FIRST], env=_env(home), capture_output=True, text=True,
                         timeout=120)
    assert "refused:" in out.stdout and "ORT_DISABLE_TELEMETRY" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to watch the process's network calls")
def test_loaded_embedder_makes_no_network_calls(tmp_path):
    """A process holding the model for longer than the telemetry interval sends nothing off the machine."""
    home = tmp_path / "home"
    home.mkdir()
    trace = tmp_path / "trace.txt"
    cmd = ["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-o", str(trace),
           sys.executable, "-c", HOLD_EMBEDDER, str(HOLD_SECONDS)]
    out = subprocess.run(cmd, env=_env(home), capture_output=True, text=True, timeout=180)
    if "PTRACE" in out.stderr or "Operation not permitted" in out.stderr:
        pytest.skip("strace is not permitted here")
    assert "held" in out.stdout, out.stderr
    calls = [line for line in trace.read_text().splitlines() if re.search(r"AF_INET6?|sin_port|htons", line)
             and not re.search(r'inet_addr\("127\.|inet_pton\(AF_INET6, "::1"', line)]
    assert calls == [], "\n".join(calls[:5])
    assert _telemetry_state(home) == []
