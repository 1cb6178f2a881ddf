def relu(out, x):
    """out[i] = max(x[i], 0), in place, for any indexable sequences."""
    for i, v in enumerate(x):
        out[i] = v if v > 0 else 0.0
    return out
