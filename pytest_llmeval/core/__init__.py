"""The core: settings, the run model, records, statistics, errors and redaction (stdlib only)."""
