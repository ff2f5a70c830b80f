"""The one thing pyproject.toml cannot declare: kvh64's optional C extension.

``kernels/_kvh64.c`` is built at ``pip install`` (and ``pip install -e .``) when a C compiler
is there; ``optional=True`` lets an install without one finish, and kernels/checksum.py then
hashes with numpy (same bits, slower). Everything else is in pyproject.toml.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("kvtrace.kernels._kvh64", ["kernels/_kvh64.c"],
                             extra_compile_args=["-O3"], optional=True)])
