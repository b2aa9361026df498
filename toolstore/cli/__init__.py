"""The ``toolstore`` command line: a thin layer over the library. JSON on stdout unless it is a terminal."""

from .main import cli, main

__all__ = ["cli", "main"]
