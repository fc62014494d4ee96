"""Side-by-side benchmarks (``python -m benchmarks.X``); never part of the test suite."""
