"""Package faces that import a name's module only when the name is first used (PEP 562), so that importing a face
(``broker.client``, ``broker.remoting.headers``) loads nothing a caller does not touch: a Spark executor stays small."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(module: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The face's ``__getattr__`` and ``__dir__``: ``homes`` maps each exported name to the module defining it; a
    name once imported is kept in the face, so later lookups are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[module]), *homes})

    return __getattr__, __dir__
