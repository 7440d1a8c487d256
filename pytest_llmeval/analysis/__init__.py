"""Verdicts as pure functions over the run model: gates, statistics by case, comparison, merge."""
