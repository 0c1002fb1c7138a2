"""``sidecar demo``: a simulated person types into a file while a real LSP client
asks the sidecar server for inline completions and times them.

- ``run_demo(...)`` (async) runs it and returns the summary dict.
- ``main(argv)`` is the command line (``python -m sidecar.tools.demo``).
- ``add_arguments(parser)`` / ``run_from_args(ns)`` plug it into another CLI.
"""

from .cli import add_arguments, main, run_from_args
from .runner import DEFAULT_FILE, run_demo

__all__ = ["DEFAULT_FILE", "add_arguments", "main", "run_demo", "run_from_args"]
