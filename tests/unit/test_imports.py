"""The import rules of broker/'s rooms (see broker/__init__.py), checked in fresh interpreters.

A Spark executor imports the connector; a client application imports broker.client. Neither may load the broker
server, the store, the NameServer or the remoting server: they start nothing, but they cost import time and memory on
every executor, and a chain from a package face into a server is how cycles and hard-coded codes crept in before.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import broker

REPO = Path(__file__).resolve().parents[2]
SERVER_ROOMS = ("broker.server", "broker.namesrv", "broker.store", "broker.replication", "broker.remoting.server",
                "broker.tools", "broker.auth", "broker.metrics")


def loaded_after(statement: str) -> list[str]:
    """The project modules a fresh interpreter has loaded after ``statement``."""
    code = (f"import sys, json\n{statement}\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('broker', 'connector', 'jobs'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("statement", ["import connector.source, connector.sink",
                                       "from broker.client import BlockingClient, Producer, PushConsumer",
                                       "import connector.resolver, connector.decisions"])
def test_executors_and_clients_load_no_server_code(statement: str) -> None:
    loaded = loaded_after(statement)
    server = [m for m in loaded if any(m == room or m.startswith(room + ".") for room in SERVER_ROOMS)]
    assert server == [], f"{statement!r} loads {server}"
    assert "broker.client.blocking" in loaded  # the check would pass vacuously if nothing were imported


def test_an_executor_loads_no_asyncio_client() -> None:
    """broker.client's face imports its names when first used: the connector's tasks get the blocking client only."""
    loaded = loaded_after("import connector.source, connector.sink")
    assert "broker.client.blocking" in loaded
    assert not {"broker.client.producer", "broker.client.push_consumer", "broker.client.consumer"} & set(loaded)


def test_an_executor_loads_no_event_loop() -> None:
    """Spark starts a Python process per streaming query that imports the source: the blocking client's framing and
    defaults live in the sans-IO exchange, so that process never imports asyncio or ssl (tens of ms of its start)."""
    code = "import sys, connector.source, connector.sink; print(sorted({'asyncio', 'ssl'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]


def test_the_resolver_loads_no_spark() -> None:
    """The sink starts a resolver process per batch job, beside the job's tasks: importing the ``connector`` package
    on the way to ``connector.resolver`` must not pull in PySpark (a fifth of that process's start); the package's
    ``RmqDataSource`` still loads when named."""
    code = ("import sys, connector.resolver\nbefore = 'pyspark' in sys.modules\n"
            "from connector import RmqDataSource\nprint(before, 'pyspark' in sys.modules, RmqDataSource.name())")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "rmq"]


@pytest.mark.parametrize("statement", ["import connector.source", "import connector.sink"])
def test_an_executor_loads_only_the_headers_it_frames(statement: str) -> None:
    """broker.remoting.headers' face imports each header from its module when first used: the read path (pull, and
    the route it asks the NameServer for when a broker moves) and the write path (send, END_TRANSACTION, routes)
    load the message and route headers, never the NameServer's (brokers' registrations, KV config), the admin ones
    (topics, groups, clients) or the broker's own."""
    loaded = {m for m in loaded_after(statement) if m.startswith("broker.remoting.headers")}
    assert loaded == {"broker.remoting.headers", "broker.remoting.headers.base", "broker.remoting.headers.message",
                      "broker.remoting.headers.route"}, f"{statement!r} loads {sorted(loaded)}"


def test_the_headers_face_names_every_header_once() -> None:
    """Every name of the face resolves to the class of its own module, and the face lists them all (dir, __all__)."""
    import importlib

    from broker.remoting import headers

    assert sorted(headers._HOMES) == sorted(headers.__all__)
    for name, home in headers._HOMES.items():
        assert getattr(headers, name) is getattr(importlib.import_module(home), name), name
    assert set(headers.__all__) <= set(dir(headers))
    with pytest.raises(AttributeError, match="NoSuchHeader"):
        headers.NoSuchHeader  # noqa: B018


def test_tools_load_no_broker_store_or_namesrv_code() -> None:
    """mqadmin speaks to brokers and NameServers through the wire bodies of broker.remoting, not the server's."""
    loaded = loaded_after("import broker.tools.mqadmin, broker.tools.messages")
    server = [m for m in loaded
              if m.startswith(("broker.server", "broker.namesrv", "broker.store", "broker.replication"))]
    assert server == [], server
    assert "broker.tools.admin" in loaded


def test_common_imports_only_itself_and_the_code_table() -> None:
    loaded = loaded_after("import " + ", ".join(f"broker.common.{m.name}" for m in
                                                pkgutil.iter_modules([str(REPO / "broker" / "common")])))
    outside = {m for m in loaded if not m.startswith("broker.common")}
    assert outside <= {"broker", "broker._speedups", "broker.remoting", "broker.remoting.codes"}, outside


def test_every_module_imports_first_without_a_cycle() -> None:
    """Each module imported first, in its own clean slate: a cycle between package faces shows as an ImportError
    only when the wrong module happens to be imported first."""
    names = [m.name for m in pkgutil.walk_packages(broker.__path__, "broker.")
             if not m.name.endswith("__main__") and m.name != "broker._speedups"]
    code = ("import importlib, sys\nfailed = []\n"
            f"for name in {names!r}:\n"
            "    for loaded in [m for m in sys.modules if m.split('.')[0] in ('broker', 'connector', 'jobs')]:\n"
            "        del sys.modules[loaded]\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except ImportError as err:\n        failed.append(f'{name}: {err}')\n"
            "print('\\n'.join(failed))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout
    assert len(names) > 60


# What each room may import (broker/__init__.py); a module's own room is always allowed.
ROOM_RULES = {
    "broker.common": ("broker.common", "broker.remoting.codes", "broker._speedups"),
    "broker.remoting": ("broker.common", "broker._speedups"),
    "broker.store": ("broker.common", "broker._speedups"),
    "broker.namesrv": ("broker.common", "broker.remoting", "broker.metrics"),
    "broker.metrics": ("broker.common", "broker.remoting"),
    "broker.client": ("broker.common", "broker.remoting"),
    "broker.tools": ("broker.common", "broker.remoting", "broker.client"),
    "broker.console": ("broker.common", "broker.remoting", "broker.client", "broker.tools"),
    "broker.replication": ("broker.common", "broker.store"),
    "broker.dledger": ("broker.common", "broker.store", "broker.remoting"),
    "broker.auth": ("broker.common", "broker.remoting"),
    "broker.server": ("broker.common", "broker.remoting", "broker.store", "broker.replication", "broker.dledger",
                      "broker.auth", "broker.metrics", "broker._speedups"),
    "connector": ("broker.common", "broker.remoting", "broker.client", "broker._speedups"),
}


def imported_modules(path: Path) -> set[str]:
    """Every project module ``path`` imports at run time, at any depth (function-level imports included; those
    under ``if TYPE_CHECKING:`` only name types for annotations and are left out)."""
    tree = ast.parse(path.read_text())
    type_only = {id(node) for block in ast.walk(tree)
                 if isinstance(block, ast.If) and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                 for node in ast.walk(block)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # a name or a submodule
    return {name for name in found if name.split(".")[0] in ("broker", "connector", "jobs")}


@pytest.mark.parametrize("room", sorted(ROOM_RULES))
def test_each_room_imports_only_what_it_may(room: str) -> None:
    allowed = (room, *ROOM_RULES[room])  # and the top package's face, ``broker`` itself
    directory = REPO.joinpath(*room.split("."))
    broken = sorted(f"{path.relative_to(REPO)}: {name}" for path in directory.rglob("*.py")
                    for name in imported_modules(path)
                    if name != "broker" and not any(name == prefix or name.startswith(prefix + ".")
                                                    for prefix in allowed))
    assert broken == []
