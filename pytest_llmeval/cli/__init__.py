"""The command line: ``python -m pytest_llmeval ...``."""
