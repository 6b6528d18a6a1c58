#!/usr/bin/env bash
# The tests: install local-rag with its test extra into .venv (first run only: ./install.sh test), run pytest.
#   ./test.sh [PYTEST ARGS]        e.g. ./test.sh -m "not postgres" -x, ./test.sh tests/test_cli.py
# The browser tests drive Debian's Chromium (/usr/bin/chromium) and skip without it (.ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")"
./install.sh test
exec .venv/bin/python -m pytest -q "$@"
