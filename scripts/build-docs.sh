#!/usr/bin/env bash
# Build the documentation site into site/ (open site/index.html, or serve it with
# `python -m http.server -d site`). --strict: a broken link, anchor or reference stops the build.
# The reference pages (options, scorers, errors, report schema, API) are generated from the code
# at build time by docs/hooks.py. Extra arguments go to `mkdocs build`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python -c "import mkdocs, material, mkdocstrings_handlers.python" >/dev/null 2>&1; then
    python -m pip install --quiet -e ".[docs]"
fi
export NO_MKDOCS_2_WARNING=1
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python -m mkdocs build --strict --site-dir site "$@"
echo "documentation built: $(pwd)/site/index.html"
