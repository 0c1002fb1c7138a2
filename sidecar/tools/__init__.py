"""Tooling around the product: what benchmarks, simulates, demonstrates, diagnoses or
installs the sidecar (``bench/``, ``simulator/``, ``demo/``, ``doctor/``,
``install_editor.py``). Nothing under ``sidecar/lsp``, ``sidecar/completion`` or
``sidecar/backends`` imports from here. See docs/architecture.md.
"""
