"""Where results and shared state are kept: the SQLite cache, Redis, rate-limit buckets, spend,
run history."""
