"""Reports of a run's score records: the terminal summary and the JSON report."""
