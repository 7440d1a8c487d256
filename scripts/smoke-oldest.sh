#!/usr/bin/env bash
# The smoke subset (tests marked `smoke`: concurrent cases, xdist, fixtures, the terminal summary,
# gates, the cache, and tests/unit/plugin/test_pytest_compat.py) against the supported pytest and pytest-xdist
# versions that this environment does not have.
#
#   bash scripts/smoke-oldest.sh [oldest] [newest] [latest]   (default: oldest newest)
#
#   oldest  a clean venv with the floors pyproject.toml declares (pytest, pytest-xdist, pluggy),
#           the project's other runtime dependencies (no torch/bert-score: no smoke test needs
#           them), hypothesis (imported at collection) and this checkout, installed editable
#   newest  this environment (what scripts/run-tests.sh installed)
#   latest  a clean venv with the newest releases inside the declared ranges
#
# The venvs live outside the checkout (SMOKE_VENV_DIR, default $TMPDIR or /tmp), one per checkout
# and mode, and are reused when their requirements are unchanged. Extra pytest arguments go in
# SMOKE_PYTEST_ARGS. Each step prints its time in seconds. PYTHON: the interpreter of "newest" and the
# base of the venvs (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python}
modes=("$@")
if [ ${#modes[@]} -eq 0 ]; then
    modes=(oldest newest)
fi

# The requirement lines of a mode, from pyproject.toml (one place says what is supported).
requirements() {
    "$PYTHON" - "$1" <<'EOF'
import re, sys, tomllib

mode = sys.argv[1]
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
# hypothesis: test modules outside the subset import it at collection (a dev dependency)
# what test modules import when collected (the smoke run collects the whole suite)
# (and the reference implementations tests/unit/core/test_agreement.py checks against)
dev = [
    r
    for r in extras["dev"]
    if r.startswith(("hypothesis", "markdown-it-py", "scikit-learn", "statsmodels", "krippendorff"))
]
reqs = list(project["dependencies"]) + list(extras["xdist"]) + dev
for req in reqs:
    name, spec = re.match(r"^([A-Za-z0-9_.\-\[\]]+)\s*(.*)$", req).groups()
    floor = re.search(r">=\s*([0-9][0-9.]*)", spec)
    if mode == "oldest" and name in ("pytest", "pytest-xdist", "pluggy"):
        if floor is None:
            sys.exit(f"pyproject.toml: {req!r} declares no floor to test")
        print(f"{name}=={floor.group(1)}")
    else:
        print(req)
EOF
}

# pip, quiet: its output (warnings included) goes to a log printed (its last 60 lines) only when
# pip fails.
pip_q() {
    local out status=0
    out=$(mktemp -t smoke-oldest.XXXXXX.log)
    "$@" --quiet --progress-bar off >"$out" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        echo "smoke: failed (exit $status): $*; last lines of its output (whole log kept: $out):" >&2
        tail -n 60 "$out" >&2
        return "$status"
    fi
    rm -f "$out"
}

venv_for() {
    local mode=$1 key
    key=$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)
    echo "${SMOKE_VENV_DIR:-${TMPDIR:-/tmp}}/pytest-llmeval-smoke-$mode-$key"
}

make_venv() {
    local mode=$1 venv reqs start
    venv=$(venv_for "$mode")
    reqs=$(requirements "$mode")
    start=$SECONDS
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$reqs" ]; then
        rm -rf "$venv"
        # PYTHON may itself be a venv's interpreter (scripts/run-tests.sh passes its chosen
        # environment's): venv then builds on that venv's base interpreter, with none of its packages.
        "$PYTHON" -m venv "$venv"
        # shellcheck disable=SC2086  # one requirement a line, none with spaces
        pip_q "$venv/bin/python" -m pip install $(if [ "$mode" = latest ]; then echo --upgrade; fi) $reqs
        printf '%s' "$reqs" >"$venv/.requirements"
    fi
    # the checkout itself, every time (the entry point registers the plugin; a venv made for
    # another checkout of the same path is re-pointed)
    pip_q "$venv/bin/python" -m pip install --no-deps -e "$ROOT"
    echo "smoke[$mode]: venv ready in $((SECONDS - start)) s: $("$venv/bin/python" -m pip list \
        2>/dev/null | grep -iE '^(pytest|pytest-xdist|pluggy) ' | tr -s ' ' | paste -sd, -)"
}

run_smoke() {
    local mode=$1 python=$2 start status=0
    start=$SECONDS
    # shellcheck disable=SC2086  # SMOKE_PYTEST_ARGS is a list of words
    "$python" -m pytest -p no:cacheprovider -ra -n 2 --dist loadgroup -m smoke \
        ${SMOKE_PYTEST_ARGS:-} tests || status=$?
    echo "smoke[$mode]: pytest exited $status in $((SECONDS - start)) s"
    return "$status"
}

for mode in "${modes[@]}"; do
    case $mode in
    oldest | latest)
        make_venv "$mode"
        run_smoke "$mode" "$(venv_for "$mode")/bin/python"
        ;;
    newest)
        run_smoke "$mode" "$PYTHON"
        ;;
    *)
        echo "smoke-oldest.sh: unknown mode '$mode' (oldest, newest or latest)" >&2
        exit 2
        ;;
    esac
done
