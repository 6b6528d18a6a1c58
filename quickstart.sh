#!/usr/bin/env bash
# Quick start: install local-rag into .venv (first run only: ./install.sh, the main job's packages), index a folder,
# search it. The tests: ./test.sh.
#   ./quickstart.sh [FOLDER] [QUERY]
# Embedded defaults: SQLite (rag.db) + the bundled ONNX embedder; no server, nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")"
folder="${1:-tests/fixtures/vault}"
query="${2:-what are the risks of the kube-proxy upgrade}"

[ -x .venv/bin/local-rag ] || echo "first run: installing local-rag into .venv (1-3 minutes; later runs start at once)" >&2
./install.sh
name=$(basename "$(cd "$folder" && pwd)" | tr -c 'A-Za-z0-9_\n' '_')
case "$name" in [A-Za-z]*) ;; *) name="c_$name" ;; esac
status=0
.venv/bin/local-rag index project "$name" "$folder" || status=$?
case $status in 0|6|7) ;; *) exit "$status" ;; esac  # 6/7: indexed, but some items failed / a source was skipped
.venv/bin/local-rag search "$query" --collection "$name"
