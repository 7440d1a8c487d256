"""The plugin's version: the one the distribution's metadata (setuptools reads it here) and the
JSON report name, re-exported as ``pytest_llmeval.__version__``."""

__version__ = "0.1.0"


#: This project's distribution name. ``pytest-llmeval`` on PyPI is another project that ships a
#: module of the same name, so its metadata says nothing about the code that ran.
DISTRIBUTION = "pytest-llmeval-suite"
