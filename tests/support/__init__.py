"""Helpers that tests/unit and tests/e2e both import (``from support.documents import ...``).

On sys.path through ``pythonpath = ["tests"]`` in pyproject.toml's [tool.pytest.ini_options].
A module here is named by its topic and stays in process: no subprocess, socket, server or
simulator, so that a unit test importing it stays a unit test. Helpers only the end-to-end
tests need (a real sidecar over stdio, processes) are tests/e2e/conftest.py's.
"""
