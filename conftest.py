"""Root conftest: makes ../shared (parity vectors) discoverable for the test suite."""
