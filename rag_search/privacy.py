"""Nothing leaves the machine: the telemetry switches of every library local-rag loads, set before they load.

Measured (strace, issue 7): onnxruntime ≥ 1.2x on Linux resolves mobile.events.data.microsoft.com every
5–8 s and writes a device id under ~/.cache/Microsoft/ unless ORT_DISABLE_TELEMETRY=1 is in the
environment *when onnxruntime is imported* (`onnxruntime.disable_telemetry_events()` does not stop it).
Dagster uploads usage logs unless its instance or DAGSTER_DISABLE_TELEMETRY says no; huggingface_hub
(a dependency of tokenizers' tooling) honours HF_HUB_OFFLINE; the MCP SDK emits OpenTelemetry spans,
which go nowhere without an SDK and exporter, and OTEL_SDK_DISABLED makes sure of it. Checked and
silent: tokenizers, pymupdf, lxml, bs4, watchdog, sqlite-vec, uvicorn, httpx. `rag_search` imports this module first,
so every entry point (CLI, MCP server, Dagster code location, tests) and every child process it starts
inherits these settings.
"""

from __future__ import annotations

import os
import sys

OFFLINE_ENV = {
    "ORT_DISABLE_TELEMETRY": "1",  # onnxruntime: no 1DS telemetry, no ~/.cache/Microsoft state
    "DAGSTER_DISABLE_TELEMETRY": "1",  # dagster: no usage-log uploads, whatever the instance says
    "HF_HUB_OFFLINE": "1",  # huggingface_hub: never reach the hub
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",  # the cross-tool convention
    "OTEL_SDK_DISABLED": "true",  # the MCP SDK traces through OpenTelemetry: no exporter, ever
}

_ort_loaded_before = False


def lock_down() -> None:
    """Put the offline switches into this process's environment (and so its children's)."""
    global _ort_loaded_before
    if "onnxruntime" in sys.modules and os.environ.get("ORT_DISABLE_TELEMETRY") != "1":
        _ort_loaded_before = True
    os.environ.update(OFFLINE_ENV)


def check_onnxruntime() -> None:
    """Refuse to run the model if onnxruntime was imported before its telemetry could be switched off."""
    from rag_search.errors import EmbedderError

    if _ort_loaded_before:
        raise EmbedderError(
            "onnxruntime was imported before local-rag could switch its telemetry off, so it would contact "
            "Microsoft's telemetry endpoint. Import rag_search before onnxruntime, or set "
            "ORT_DISABLE_TELEMETRY=1 in the environment."
        )


lock_down()
