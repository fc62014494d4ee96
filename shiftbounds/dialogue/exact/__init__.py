"""The exact (tabular) view of the dialogue tasks: :mod:`.agents` (behaviour cloning),
:mod:`.calibration` (count and shared-rate simulators fitted to logs), :mod:`.paradigms` (Static
Context, Interactive and Calibrated Interactive RL solved exactly, with every shift measured) and
:mod:`.study` (one cell of the regime map)."""
