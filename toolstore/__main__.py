"""``python -m toolstore``: the command line."""

from .cli.main import main

main()
