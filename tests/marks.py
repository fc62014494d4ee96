"""Markers shared by the tests: ``needs_data`` skips, naming the folder, a test that reads the shared
Taskmaster corpora where they are not on disk (the README says where to get them)."""

from __future__ import annotations

import pytest

from shiftbounds.conversations.taskmaster import default_data_dir

needs_data = pytest.mark.skipif(not (default_data_dir() / "taskmaster4").exists(),
                                reason=f"Taskmaster corpora not found under {default_data_dir()} (see the README's data section)")
