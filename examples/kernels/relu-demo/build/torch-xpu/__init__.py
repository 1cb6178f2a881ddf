"""relu-demo, XPU build: its metadata.json is truncated, so the hub loader
refuses it before this file is read (preflight: import_error)."""


def relu(out, x):
    for i, v in enumerate(x):
        out[i] = v if v > 0 else 0.0
    return out
