"""relu-demo for Windows: never loaded on Linux or macOS (preflight: skipped)."""

raise ImportError("this variant only runs on Windows")
