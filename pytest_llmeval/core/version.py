"""The plugin's version: the one the distribution's metadata (setuptools reads it here) and the
JSON report name, re-exported as ``pytest_llmeval.__version__``."""

__version__ = "0.1.0"
