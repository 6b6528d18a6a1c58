#!/usr/bin/env bash
# Quick start: install local-rag into .venv (first run only), index a folder, search it.
#   ./quickstart.sh [FOLDER] [QUERY]
# Embedded defaults: SQLite (rag.db) + the bundled ONNX embedder; no server, nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")"
folder="${1:-tests/fixtures/vault}"
query="${2:-what are the risks of the kube-proxy upgrade}"
if [ ! -x .venv/bin/local-rag ]; then
  echo "installing local-rag into .venv (first run only) ..." >&2
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test]"
fi
name=$(basename "$(cd "$folder" && pwd)" | tr -c 'A-Za-z0-9_\n' '_')
case "$name" in [A-Za-z]*) ;; *) name="c_$name" ;; esac
.venv/bin/local-rag index project "$name" "$folder"
.venv/bin/local-rag search "$query" --collection "$name"
