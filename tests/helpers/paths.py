"""Where things are in the repository, for tests at any depth under ``tests/``."""

from __future__ import annotations

from pathlib import Path

#: the ``tests/`` folder
TESTS = Path(__file__).resolve().parent.parent
#: the repository's root
ROOT = TESTS.parent
#: test data (``tests/data``): files, not tests
DATA = TESTS / "data"
#: the project's copy of the parity reference numbers
PARITY = TESTS / "parity"
#: the runnable examples
EXAMPLES = ROOT / "examples"
#: the package's source
PACKAGE = ROOT / "pytest_llmeval"
