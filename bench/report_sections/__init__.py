"""The sections of docs/benchmarks.md, one module each (bench/report.py runs them in order)."""
