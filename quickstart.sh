#!/usr/bin/env bash
# Quick start: install local-rag into .venv (first run only), index a folder, search it.
#   ./quickstart.sh [FOLDER] [QUERY]
# Embedded defaults: SQLite (rag.db) + the bundled ONNX embedder; no server, nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")"
folder="${1:-tests/fixtures/vault}"
query="${2:-what are the risks of the kube-proxy upgrade}"

t0=$SECONDS
say() { printf '[%3d s] %s\n' "$((SECONDS - t0))" "$*" >&2; }

# pip's output, condensed to what it is doing: one line redrawn on a terminal, a line per step in a log.
# Its errors (on stderr) are shown in full.
pip_steps() {
  awk -v tty="$([ -t 2 ] && echo 1 || echo 0)" '
    function show(msg) {
      if (msg == last) return
      last = msg
      if (tty) printf "\r\033[K        %s", substr(msg, 1, 100) > "/dev/stderr"
      else print "        " msg > "/dev/stderr"
      fflush("/dev/stderr")
    }
    /^Collecting / { n++; if (tty || n % 10 == 1) show("resolving dependencies (" n " so far): " $2); next }
    /^ *Downloading .*\.whl / && !/metadata/ { show("downloading " $2 " " $3 $4); next }
    /^Building wheel|^ *Building editable/ { show("building local-rag"); next }
    /^Installing collected packages/ { show("unpacking " n " packages (the longest step) ..."); next }
    /^Successfully installed/ { show("done"); if (tty) printf "\n" > "/dev/stderr"; next }
  '
}

if [ ! -x .venv/bin/local-rag ]; then
  say "first run: installing local-rag into .venv (1-2 minutes; later runs start at once)"
  say "creating .venv with $(python3 --version 2>&1)"
  python3 -m venv .venv
  say "updating pip"
  .venv/bin/python -m pip install --quiet --upgrade pip
  say "installing local-rag and its dependencies (Dagster, ONNX Runtime, sqlite-vec, document parsers)"
  .venv/bin/python -m pip install --progress-bar off -e ".[test]" | pip_steps
  say "installed; indexing $folder"
fi
name=$(basename "$(cd "$folder" && pwd)" | tr -c 'A-Za-z0-9_\n' '_')
case "$name" in [A-Za-z]*) ;; *) name="c_$name" ;; esac
status=0
.venv/bin/local-rag index project "$name" "$folder" || status=$?
case $status in 0|6|7) ;; *) exit "$status" ;; esac  # 6/7: indexed, but some items failed / a source was skipped
.venv/bin/local-rag search "$query" --collection "$name"
