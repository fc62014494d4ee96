"""Small neural building blocks (torch): a causal transformer with a key-value cache, generation, and the
one gradient loop of the package's own trainers (:func:`shiftbounds.nn.fit.fit`)."""
