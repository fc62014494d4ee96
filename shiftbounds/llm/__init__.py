"""The transformers path: Hugging Face causal LMs on real dialogues (Taskmaster-4/3) and GSM8K.

Device and dtype are decided once (:func:`shiftbounds.llm.models.resolve_device`); losses come
from :mod:`shiftbounds.losses`; results use the layout of the full pipeline.
"""
