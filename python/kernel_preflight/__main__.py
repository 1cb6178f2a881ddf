"""`python -m kernel_preflight ARGS` runs `preflight ARGS`."""

import os
import sys

from ._binary import find_preflight

if __name__ == "__main__":
    binary = os.fspath(find_preflight())
    os.execv(binary, [binary, *sys.argv[1:]])
