# Sourced by scripts/run-tests.sh and scripts/run-examples.sh (not run on its own).
#
# Picks the Python environment that everything after it installs into and runs with, and says
# which on one line:
#   * an active virtual environment (VIRTUAL_ENV set, or `python` is a venv's interpreter);
#   * otherwise the project's own .venv (created on first use), never the global interpreter.
# Then sets PY (that interpreter), exports PYTHON=$PY (scripts/setup_local_judge.sh and
# scripts/smoke-oldest.sh read it) and puts the environment's bin/ first on PATH, so that a bare
# `python`, `pytest`, `ruff` or `mypy` started under these scripts is that environment's too.
#
# Also: step (one progress line on stderr, with the time since the script started), quietly
# (run a command with its output in a log file, printed only when it fails), pip_install and
# apt_install_missing. The caller sets STEP_TAG (e.g. run-tests) before sourcing.

STEP_TAG=${STEP_TAG:-scripts}
STEP_START=${STEP_START:-$SECONDS}
step() { echo "[$STEP_TAG] $(printf '%d:%02d' $(((SECONDS - STEP_START) / 60)) $(((SECONDS - STEP_START) % 60))) $*" >&2; }

# quietly CMD...: CMD's output goes to a temporary log; on failure its last 60 lines are printed
# (and the whole log kept), so a failing install still shows why.
quietly() {
    local log status=0
    log=$(mktemp -t "$STEP_TAG.XXXXXX.log")
    "$@" >"$log" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        echo "[$STEP_TAG] failed (exit $status): $*" >&2
        echo "[$STEP_TAG] last lines of its output (whole log kept: $log):" >&2
        tail -n 60 "$log" >&2
        return "$status"
    fi
    rm -f "$log"
}

pip_install() { quietly "$PY" -m pip --disable-pip-version-check install --quiet --progress-bar off "$@"; }

# apt_install_missing COMMAND PACKAGE: installs PACKAGE when COMMAND is missing and we can (root
# with apt-get); otherwise says so and carries on (the tests or examples needing it skip and say
# why).
apt_install_missing() {
    if command -v "$1" >/dev/null 2>&1; then return 0; fi
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        step "installing $2 (apt-get: $1 is missing)"
        if [ -z "${_APT_UPDATED:-}" ]; then
            quietly apt-get update -qq
            _APT_UPDATED=1
        fi
        quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"
    else
        step "$1 is missing and not installed here (needs root and apt-get): apt-get install $2"
    fi
}

_venv_python_ok() { [ -x "$1/bin/python" ] && "$1/bin/python" -c 'import pip' >/dev/null 2>&1; }

_pick_env() {
    local base active
    if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
        PY="$VIRTUAL_ENV/bin/python"
        step "environment: the active virtual environment $VIRTUAL_ENV (VIRTUAL_ENV is set)"
        return 0
    fi
    if command -v python >/dev/null 2>&1; then
        active=$(python -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")' 2>/dev/null || true)
        if [ -n "$active" ]; then
            PY="$active/bin/python"
            step "environment: the active virtual environment $active (python on PATH is its interpreter)"
            return 0
        fi
    fi
    if _venv_python_ok .venv; then
        PY="$PWD/.venv/bin/python"
        step "environment: the project's .venv ($PWD/.venv; no virtual environment is active)"
        return 0
    fi
    base=$(command -v python3 || command -v python || true)
    if [ -z "$base" ]; then
        echo "[$STEP_TAG] no python3 found: install Python 3.11 or newer" >&2
        return 1
    fi
    step "environment: creating the project's .venv from $base (no virtual environment is active)"
    rm -rf .venv
    if ! "$base" -m venv .venv >/dev/null 2>&1; then
        rm -rf .venv
        # Debian/Ubuntu ship the venv module's ensurepip separately (python3-venv, python3.X-venv).
        local pkg
        pkg="python$("$base" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
            step "installing $pkg (apt-get: $base cannot create a venv)"
            quietly apt-get update -qq
            _APT_UPDATED=1
            quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv "$pkg"
            quietly "$base" -m venv .venv
        else
            echo "[$STEP_TAG] $base cannot create a virtual environment (no venv/ensurepip)." >&2
            echo "[$STEP_TAG] run: sudo apt-get install python3-venv $pkg   (or activate a venv of your own), then re-run" >&2
            return 1
        fi
    fi
    PY="$PWD/.venv/bin/python"
}

_pick_env
PYTHON=$PY
export PYTHON
PATH="$(dirname "$PY"):$PATH"
export PATH
