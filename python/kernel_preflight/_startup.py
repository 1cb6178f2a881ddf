"""Run by `kernel_preflight.pth` at interpreter start-up when
`KERNEL_PREFLIGHT` is in the environment. It must never stop the
interpreter from starting: a fault is one line on stderr."""

try:
    from ._enable import from_environment

    from_environment()
except Exception as e:  # pragma: no cover - a broken install
    import sys

    sys.stderr.write(f"kernel_preflight: warning: KERNEL_PREFLIGHT could not be acted on: {e!r}\n")
