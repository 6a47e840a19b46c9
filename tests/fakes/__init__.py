"""Scripts that misbehave on purpose, run as children by the supervisor tests."""
