"""Smoke runs of benchmarks/: every benchmark keeps working (figures not asserted)."""
