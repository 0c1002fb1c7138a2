"""sidecar: a local LSP sidecar that makes AI inline code completion feel instant."""

__version__ = "0.1.0"
