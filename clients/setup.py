"""Build the optional C twins: the record-batch codec (strom.records._native) and the
producer's per-record send path (strom.producer._native).

The pure-Python codec is the reference; the extension is bound at import time when it built.
Set STROM_NO_EXTENSIONS=1 at build time to skip it, or at run time to ignore it.
"""

import os

from setuptools import Extension, setup

extensions = []
if not os.environ.get("STROM_NO_EXTENSIONS"):
    extensions.append(
        Extension(
            "strom.records._native._crecords",
            sources=["src/strom/records/_native/_crecords.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        )
    )
    extensions.append(
        Extension(
            "strom.producer._native._cproducer",
            sources=["src/strom/producer/_native/_cproducer.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        )
    )

setup(ext_modules=extensions)
