"""``python -m sidecar.config [docs/configuration.md]``: rewrite the settings table of
the page from the declaration (``doc.py``)."""

from .doc import main

main()
