"""relu-demo, CPU build: needs a compiled helper package that is not
installed here, so importing it fails with ModuleNotFoundError
(preflight: missing_dependency)."""

import relu_demo_native  # noqa: F401  (a fictional extension package)


def relu(out, x):
    return relu_demo_native.relu(out, x)
