"""Plumbing shared by experiments: atomic results files, progress with ETA, statistics, figures."""
