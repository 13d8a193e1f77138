"""Benchmarks of isparse (issue 6): run ``python -m benchmarks`` from the repository root.

Not part of the test suite (pytest's ``testpaths`` is ``tests``). Every figure is a ratio against a
baseline measured in the same run (median of several repetitions); absolute times are reported, not asserted.
"""
