"""Metadata is in setup.cfg; this file only declares the optional C extension (crawler_lib/fingerprint.py)."""
from setuptools import Extension, setup

# optional: where no C compiler exists the install goes on, and the fingerprint uses its Python form
setup(ext_modules=[Extension("crawler_lib._simhash", ["crawler_lib/_simhash.c"], optional=True)])
