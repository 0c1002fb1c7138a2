"""Packages and package data (the rest of the metadata is in pyproject.toml).

A wheel carries the files that ``sidecar install-editor`` and ``sidecar demo`` need at run
time, mapped from where they live in the source tree (no copies, no build step):

- ``editors/``      -> ``sidecar/_editors/`` (``sidecar.tools.install_editor.editors_dir``)
- ``fixtures/demo/`` -> ``sidecar/tools/demo/data/`` (``sidecar.tools.demo.runner.DEFAULT_FILE``)

In a source checkout (editable install) the code reads ``editors/`` and ``fixtures/demo/``
directly. The VS Code extension goes in as its built ``sidecar.vsix`` only, when one has
been built (``cd editors/vscode && npm run package``) before the wheel; its sources and
node_modules stay out.
"""

from setuptools import find_packages, setup

EDITOR_FILES = [
    "emacs/sidecar.el",
    "helix/languages.toml",
    "neovim/README.md",
    "neovim/lua/sidecar/*.lua",
    "vscode/sidecar.vsix",
]

setup(
    packages=[*find_packages(include=["sidecar", "sidecar.*"]), "sidecar._editors", "sidecar.tools.demo.data"],
    package_dir={"sidecar._editors": "editors", "sidecar.tools.demo.data": "fixtures/demo"},
    package_data={"sidecar._editors": EDITOR_FILES, "sidecar.models": ["licenses/*.txt"]},
    # Only what is listed here: editors/vscode holds node_modules and build output.
    include_package_data=False,
)
