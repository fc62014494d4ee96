"""A check shared by the trainer tests: a model that TRL calls with left-padded rows scores each
row as the row alone."""

from __future__ import annotations

import torch


def assert_left_padding_is_invisible(models, plain, vocab: int = 100) -> None:
    """Each of ``models`` gives a left-padded row the logits of the row alone, called as TRL calls
    it (``input_ids`` and ``attention_mask``, no ``position_ids``), while ``plain`` (the same
    weights without :func:`~shiftbounds.conversations.models.count_positions_from_mask`) does not:
    the check can fail."""
    row = torch.randint(5, vocab, (1, 7), generator=torch.Generator().manual_seed(0))
    padded = torch.cat([torch.zeros(1, 4, dtype=torch.long), row], 1)
    mask = torch.cat([torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 7, dtype=torch.long)], 1)
    with torch.no_grad():
        for model in models:
            model.eval()
            torch.testing.assert_close(model(input_ids=padded, attention_mask=mask).logits[:, 4:], model(input_ids=row).logits)
        plain.eval()
        off = (plain(input_ids=padded, attention_mask=mask).logits[:, 4:] - plain(input_ids=row).logits).abs().max()
    assert off > 1e-2
