"""relu-demo: a pure-Python ReLU in the hub's kernel layout.

This variant has no top-level `__init__.py`, so the loader falls back to
`relu_demo/__init__.py`; the relative import below works only when the
module is registered in `sys.modules` under its metadata id, as the hub
loader does.
"""

from ._impl import relu

__all__ = ["relu"]
