"""The scoring engine: the Scorer API, the registry, the scoring context and the public
assertion functions."""
