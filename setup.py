"""The one C extension (broker._speedups, the store's per-message loops); everything else is in pyproject.toml.
``optional``: without a C compiler the install still succeeds, and the store runs the same loops in Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("broker._speedups", ["broker/_speedups.c"], libraries=["z"],
                             extra_compile_args=["-O2"], optional=True)])
