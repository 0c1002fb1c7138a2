"""What users run besides the server: the demo (``demo/``), the setup checks
(``doctor/``) and the editor installer (``install_editor.py``). Nothing under
``sidecar/lsp``, ``sidecar/completion`` or ``sidecar/backends`` imports from here. The
simulator and the benchmarks are development tools outside the package (``devtools/``).
See docs/architecture.md.
"""
