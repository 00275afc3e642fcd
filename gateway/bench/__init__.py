"""Throughput benchmarks behind ``streamgate bench``: they report numbers, they assert nothing."""
