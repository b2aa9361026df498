"""``python -m toolstore.cli``."""

from .main import main

main()
