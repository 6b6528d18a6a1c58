"""The code location on the runs executed in-process (CLI, watcher, MCP), so the UI can re-execute them.

The UI's "Re-execute" (GraphQL `launchPipelineReexecution`) finds the parent run's job in the workspace by the run's
`remote_job_origin`: its code location's and repository's names. `execute_in_process` leaves it empty, and the UI
showed a raw stack trace ("CheckError: Expected non-None value"). Within `located()`, the runs an instance creates
carry the origin of workspace.yaml's location (`rag`, module rag_pipelines, attribute defs), whose definitions hold
the same jobs: a re-execution then goes through the run queue like any run launched from the UI.
"""

from __future__ import annotations

import functools
import sys
from contextlib import contextmanager
from typing import Iterator

from rag_pipelines.wiring.reload import LOCATION

MODULE, ATTRIBUTE = "rag_pipelines", "defs"  # what workspace.yaml loads (wiring/instance.py)


def job_origin(job_name: str):
    """The RemoteJobOrigin of `job_name` in local-rag's code location."""
    from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
    from dagster._core.remote_origin import (ManagedGrpcPythonEnvCodeLocationOrigin, RemoteJobOrigin,
                                             RemoteRepositoryOrigin)
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    target = LoadableTargetOrigin(executable_path=sys.executable, module_name=MODULE, attribute=ATTRIBUTE)
    location = ManagedGrpcPythonEnvCodeLocationOrigin(target, LOCATION)
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, SINGLETON_REPOSITORY_NAME), job_name)


@contextmanager
def located(instance, job_name: str) -> Iterator[None]:
    """Runs `instance` creates within (`execute_in_process` makes one) carry `job_name`'s origin in the location."""
    instance.create_run_for_job = functools.partial(instance.create_run_for_job, remote_job_origin=job_origin(job_name))
    try:
        yield
    finally:
        del instance.create_run_for_job  # the class's method again
