"""Tasks in OSWorld's JSON format: loading, setup steps, getters and metrics (evaluators)."""
