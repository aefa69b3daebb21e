"""The N-Quads view of a CDIF record, for loading into a triple store.

:func:`record_nquads` turns the record's JSON-LD into RDF with pyld's ``to_rdf`` and the offline
document loader (nothing is ever fetched): every triple in the named graph of the record, lines
sorted and unique, so the same record always gives the same bytes.

See docs/decisions/0038-nquads-view.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyld import jsonld

from cdif_harvester.domain.records import jsonld_loader
from cdif_harvester.errors import PermanentError

__all__ = ["NQUADS_MEDIA_TYPE", "NQuadsError", "record_nquads"]

NQUADS_MEDIA_TYPE = "application/n-quads"

_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]+$")


class NQuadsError(PermanentError):
    """The record is not JSON-LD that can be turned into RDF (it cannot get better by retry)."""

    reason = "nquads-failed"


def record_nquads(record: Mapping[str, Any], *, graph: str | None = None) -> str:
    """Return the record as N-Quads: sorted lines, each ending in a newline.

    ``graph`` names the graph every triple is put in (see the module docstring). Raises
    :class:`NQuadsError` when JSON-LD processing fails (e.g. a context the offline loader
    does not serve).
    """
    body = {key: value for key, value in record.items() if key != "@context"}
    document: dict[str, Any] = {"@graph": [body]}
    if "@context" in record:
        document["@context"] = record["@context"]
    if graph and _ABSOLUTE_IRI.match(graph):
        document["@id"] = graph
    try:
        text = jsonld.to_rdf(
            document,
            {
                "format": NQUADS_MEDIA_TYPE,
                "documentLoader": jsonld_loader.document_loader,
            },
        )
    except jsonld.JsonLdError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NQuadsError(f"the record could not be turned into RDF: {first_line}") from exc
    lines = sorted({line for line in str(text).splitlines() if line.strip()})
    return "".join(f"{line}\n" for line in lines)
