"""Regenerate every figure of the package from saved results: ``python -m paper_figures``."""
