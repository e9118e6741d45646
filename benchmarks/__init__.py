"""Benchmarks: each module has ``main(quick: bool) -> list[dict]`` returning its figures."""
