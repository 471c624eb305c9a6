"""The README's source and sink option tables ("Spark connector") against connector/options.py: every documented
option is one the parser knows and every option the parser knows is documented; each documented default is what
the parser does when the option is left out (giving the default explicitly changes nothing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.common.errors import ConnectorOptionError
from connector.options import (
    CREDENTIAL_OPTIONS,
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    UNDOCUMENTED_SINK_OPTIONS,
    SinkOptions,
    SourceOptions,
)

README = Path(__file__).resolve().parents[2] / "README.md"
SOURCE_BASE = {"namesrvAddr": "127.0.0.1:1", "topic": "T"}
SINK_BASE = {"namesrvAddr": "127.0.0.1:1", "topic": "T", "sinkId": "s"}
# Options that are accepted only next to another one.
NEEDS = {"maxTriggerDelay": {"minOffsetsPerTrigger": "1"}, "filterType": {"filter": "TagA"},
         "customizedTraceTopic": {"enableMsgTrace": "true"}}
_LITERAL = re.compile(r"`([^`]+)`(?:\s*\((stream|batch)\))?")


def option_table(title: str) -> list[tuple[list[str], str]]:
    """(option names, default cell) of each row of the first table after the paragraph starting ``title``."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("| option |"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        name_cell, default, _ = (c.strip() for c in line.strip("|").split("|", 2))
        rows.append((re.findall(r"`([^`]+)`", name_cell), default))
    return rows


SOURCE_ROWS = option_table("**Source options**")
SINK_ROWS = option_table("**Sink options and columns**")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def test_every_option_is_documented_and_every_documented_option_exists() -> None:
    source = [n for names, _ in SOURCE_ROWS for n in names]
    sink = [n for names, _ in SINK_ROWS for n in names]
    assert sorted(source) == sorted(SOURCE_OPTIONS)
    assert sorted(sink) == sorted(set(SINK_OPTIONS) - set(UNDOCUMENTED_SINK_OPTIONS))


def _source(extra: dict[str, str], streaming: bool) -> SourceOptions:
    return SourceOptions.parse({**SOURCE_BASE, **extra}, streaming=streaming)


def _defaults(names: list[str], cell: str) -> list[tuple[str, str]]:
    """(name, default text) of a row; "a, b" defaults go with "a", "b" names."""
    parts = [p.strip() for p in cell.split(",")] if len(names) > 1 and cell.count(",") == len(names) - 1 else None
    return list(zip(names, parts, strict=True)) if parts else [(name, cell) for name in names]


@pytest.mark.parametrize(("name", "cell"), [d for names, cell in SOURCE_ROWS for d in _defaults(names, cell)])
def test_source_defaults_are_the_parsers(name: str, cell: str) -> None:
    if cell == "required":
        with pytest.raises(ConnectorOptionError, match=f"{name} is required"):
            SourceOptions.parse({k: v for k, v in SOURCE_BASE.items() if k != name}, streaming=True)
    elif cell == "exactly one":
        with pytest.raises(ConnectorOptionError, match="exactly one of the options"):
            SourceOptions.parse({"namesrvAddr": "127.0.0.1:1"}, streaming=True)
    elif name in CREDENTIAL_OPTIONS:  # both or neither: without them nothing is signed
        assert _source(NEEDS.get(name, {}), True).credentials is None
    elif cell in ("", "none"):
        parsed = _source(NEEDS.get(name, {}), True)
        assert getattr(parsed, _snake(name), None) is None
    else:
        literals = _LITERAL.findall(cell) or [(cell, "")]
        checked = 0
        for value, mode in literals:
            for streaming in ((True, False) if not mode else (mode == "stream",)):
                base = NEEDS.get(name, {})
                try:
                    without = _source(base, streaming)
                except ConnectorOptionError:
                    continue
                try:
                    given = _source({**base, name: value}, streaming)
                except ConnectorOptionError as err:
                    if "apply only to" in str(err):
                        continue
                    raise
                assert given == without, f"{name}={value} ({'stream' if streaming else 'batch'}) is not the default"
                checked += 1
        assert checked, f"the default {cell!r} of {name} was not checked"


@pytest.mark.parametrize(("name", "cell"), [d for names, cell in SINK_ROWS for d in _defaults(names, cell)])
def test_sink_defaults_are_the_parsers(name: str, cell: str) -> None:
    base = {k: v for k, v in SINK_BASE.items() if k != name}
    if cell == "required":
        with pytest.raises(ConnectorOptionError, match=f"{name} is required"):
            SinkOptions.parse(base, streaming=False)
    elif name == "sinkId":  # documented as how it is derived
        assert cell.startswith("from `checkpointLocation` (stream), fresh per job (batch)")
        stream = SinkOptions.parse({**base, "checkpointLocation": "/q"}, streaming=True)
        assert stream.sink_id == SinkOptions.parse({**base, "checkpointLocation": "/q"}, streaming=True).sink_id
        assert SinkOptions.parse(base, streaming=False).sink_id != SinkOptions.parse(base, streaming=False).sink_id
    elif name == "resolverDir":  # the resolver's directory when the option is not given
        from connector.resolver import DEFAULT_DIR

        assert SinkOptions.parse(base, streaming=False).resolver_dir is None
        assert Path(_LITERAL.findall(cell)[0][0]).expanduser() == DEFAULT_DIR
    elif name in CREDENTIAL_OPTIONS:
        assert SinkOptions.parse(base, streaming=False).credentials is None
    elif cell in ("", "none"):
        assert getattr(SinkOptions.parse(base, streaming=False), _snake(name)) is None
    else:
        value = (_LITERAL.findall(cell) or [(cell, "")])[0][0]
        needs = NEEDS.get(name, {})
        assert SinkOptions.parse({**base, **needs, name: value}, streaming=False) == SinkOptions.parse(
            {**SINK_BASE, **needs}, streaming=False)
