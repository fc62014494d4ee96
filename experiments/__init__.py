"""Thin entry points: parse options, call the package, write results (``python -m experiments.X``)."""
