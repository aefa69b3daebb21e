"""The JSON forms of a catalogue entry and a URL's state are written field by field (they were
``dataclasses.asdict``, the slowest part of a catalogue write): the same dicts, for values with
every field set, so that a field added later and not written fails here."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from cdif_harvester.model import (
    CatalogEntry,
    RequestValidator,
    UrlState,
    entry_from_dict,
    entry_to_dict,
    url_state_from_dict,
    url_state_to_dict,
)

# A value other than the default for each type a field of these classes has.
_SAMPLES: dict[str, Any] = {
    "str": "text",
    "str | None": "maybe",
    "bool": True,
    "tuple[str, ...]": ("one", "two"),
    "dict[str, str]": {"core/1.1": "valid"},
    "dict[str, Any]": {"authority": "authoritative", "nested": {"list": [1, {"deep": "x"}]}},
    "tuple[RequestValidator, ...]": (
        RequestValidator("GET", "", "text/html", '"etag"', ""),
        RequestValidator("HEAD", "https://example.org/x", "", "", "Tue, 01 Jan 2026"),
    ),
}


def _full(cls: type[Any]) -> Any:
    """An instance of ``cls`` with every field set to a value of its type, none a default."""
    values = {}
    for field in dataclasses.fields(cls):
        kind = str(field.type)
        assert kind in _SAMPLES, f"no sample of {kind} for {cls.__name__}.{field.name}"
        sample = _SAMPLES[kind]
        values[field.name] = f"{field.name}-value" if isinstance(sample, str) else sample
    return cls(**values)


def test_an_entry_is_written_as_asdict_writes_it_and_read_back() -> None:
    entry = _full(CatalogEntry)

    data = entry_to_dict(entry)

    assert data == dataclasses.asdict(entry)
    assert list(data) == [field.name for field in dataclasses.fields(CatalogEntry)]
    assert entry_from_dict(data) == entry
    # (nothing mutable is shared with the entry, as asdict shares nothing)
    data["extra"]["nested"]["list"].append(2)
    data["profiles"]["x"] = "y"
    assert entry == _full(CatalogEntry)


def test_a_url_state_is_written_as_asdict_writes_it_and_read_back() -> None:
    state = _full(UrlState)

    data = url_state_to_dict(state)

    expected = dataclasses.asdict(state)
    expected["validators"] = [
        [v.method, v.url, v.accept, v.etag, v.last_modified] for v in state.validators
    ]
    assert data == expected
    assert url_state_from_dict(data) == state


@pytest.mark.parametrize("cls", [CatalogEntry, UrlState])
def test_every_field_has_a_sample_value(cls: type[Any]) -> None:
    # (a field of a new type fails here first, naming it)
    full = _full(cls)
    for field in dataclasses.fields(cls):
        assert getattr(full, field.name) != field.default
