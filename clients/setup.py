"""Build the optional C twins: the record-batch codec (strom.records._native) and the
producer's per-record send path (strom.producer._native).

The pure-Python code is the reference; an extension is bound at import time when it built.
Set STROM_NO_EXTENSIONS=1 at build time to skip them, or at run time to ignore them.
"""

import os

from setuptools import Extension, setup

MODULES = ["strom.records._native._crecords", "strom.producer._native._cproducer"]

extensions = [
    Extension(
        module,
        sources=[f"src/{module.replace('.', '/')}.c"],
        extra_compile_args=["-O3", "-std=c11"],
        optional=True,
    )
    for module in MODULES
    if not os.environ.get("STROM_NO_EXTENSIONS")
]

setup(ext_modules=extensions)
