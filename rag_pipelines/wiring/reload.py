"""Reloads the code location of a running `local-rag ui` when config.yaml or registry.yaml change.

A collection added to the config gets its asset, jobs, sensor and schedule in the UI and the daemon without a
restart (the collections already loaded follow edits by themselves: config.current_collection). An edit with an
error reloads nothing: the definitions loaded before stay, and the reason is printed.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Callable

from rag_search.config import FileWatch, Paths
from rag_search.errors import RagError

from rag_pipelines.config import load_collections, registry_path

LOCATION = "rag"  # the location_name in workspace.yaml (wiring/instance.py)
MUTATION = "mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) { __typename } }"


def follow_config(paths: Paths, url: str, echo: Callable[[str], None], stop: threading.Event,
                  interval: float = 1.0) -> threading.Thread:
    """Start the thread that looks at the config files once per `interval` and reloads the UI at `url` after a
    valid edit."""
    def run() -> None:
        watch = FileWatch([paths.config, registry_path(paths)])
        while not stop.wait(interval):
            if watch.changed():
                _reload_if_valid(paths, url, echo)

    thread = threading.Thread(target=run, name="follow-config", daemon=True)
    thread.start()
    return thread


def _reload_if_valid(paths: Paths, url: str, echo: Callable[[str], None]) -> None:
    try:
        load_collections(paths)
    except RagError as exc:
        echo(f"{exc}\n(the UI keeps the collections loaded before until the file is fixed)")
        return
    try:
        reload_location(url)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        echo(f"configuration changed, but the UI could not reload it ({exc}); use Deployment → Reload in the UI")
        return
    echo("configuration changed: the UI and its sensors use it now")


def reload_location(url: str) -> None:
    """Ask the Dagster webserver at `url` to reload local-rag's code location (its GraphQL mutation)."""
    body = json.dumps({"query": MUTATION, "variables": {"name": LOCATION}}).encode()
    request = urllib.request.Request(f"{url}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.loads(response.read())
    kind = answer["data"]["reloadRepositoryLocation"]["__typename"]
    if kind != "WorkspaceLocationEntry":
        raise ValueError(f"the webserver answered {kind}")
