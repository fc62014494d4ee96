"""Small neural building blocks (torch): a causal transformer with a key-value cache, and generation."""
