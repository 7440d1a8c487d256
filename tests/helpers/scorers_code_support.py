"""python_unit_testing: the opt-in, test pairing, reasons, pass@k (runs real sandboxed code)."""

from __future__ import annotations

SECRET_KEY = "sk-proj-Z9y8X7w6V5u4T3s2R1q0"
