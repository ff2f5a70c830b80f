"""The one thing pyproject.toml cannot declare: the optional C extensions.

``kernels/_kvh64.c`` (kvh64 on the CPU) and ``tracer/_rows.c`` (the recorder's per-event
methods, the NIXL tap's per-posting calls, its event rows to Arrow, and the ring's bookkeeping, in C) are built at ``pip install`` (and
``pip install -e .``) when a C compiler is there; ``optional=True`` lets an install without one
finish: kernels/checksum.py then hashes with numpy (same bits, slower), and the recorder
(and the NIXL tap) records with its Python methods and converts its rows with pyarrow (same rows, slower). Everything else is in pyproject.toml.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("kvtrace.kernels._kvh64", ["kernels/_kvh64.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("kvtrace.tracer._rows", ["tracer/_rows.c"],
                             extra_compile_args=["-O3"], optional=True)])
