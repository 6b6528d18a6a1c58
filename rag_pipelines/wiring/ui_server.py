"""The process `local-rag ui` starts: Dagster's webserver and daemon on local-rag's workspace, one code server shared.

`python -m dagster dev` is superseded and printed a SupersessionWarning at every start ("Use 'dg dev'
instead"); `dg dev` needs another package (dagster-dg-cli) and a dg project layout, and given a workspace file it
calls `dagster._cli.dev.dev_command_impl` itself. This does the same, with `dagster dev`'s defaults.

    python -m rag_pipelines.wiring.ui_server WORKSPACE_YAML HOST PORT
"""

from __future__ import annotations

import sys


def serve(workspace: str, host: str, port: str) -> None:
    from dagster._cli.dev import dev_command_impl
    from dagster_shared.cli import WorkspaceOpts

    dev_command_impl(code_server_log_level="warning", log_level="info", log_format="colored", port=port, host=host,
                     use_legacy_code_server_behavior=False, shutdown_pipe=None, verbose=False,
                     workspace_opts=WorkspaceOpts(workspace=[workspace]), live_data_poll_rate="2000")


if __name__ == "__main__":
    serve(*sys.argv[1:4])
