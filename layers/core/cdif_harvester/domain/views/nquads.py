"""The N-Quads view of a CDIF record, for loading into a triple store.

:func:`record_nquads` turns the record's JSON-LD into RDF with pyld's ``to_rdf`` and the offline
document loader of the contexts given
(:class:`~cdif_harvester.domain.records.contexts.JsonLdContexts`): nothing is ever fetched. Every
triple goes in the named graph of the record, lines sorted and unique, so the same record always
gives the same bytes.

See docs/decisions/0038-nquads-view.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyld import jsonld

from cdif_harvester.domain.records.contexts import JsonLdContexts, shipped_contexts
from cdif_harvester.errors import PermanentError

__all__ = ["NQUADS_MEDIA_TYPE", "NQuadsError", "record_nquads"]

NQUADS_MEDIA_TYPE = "application/n-quads"

_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]+$")


class NQuadsError(PermanentError):
    """The record is not JSON-LD that can be turned into RDF (it cannot get better by retry)."""

    reason = "nquads-failed"


def record_nquads(
    record: Mapping[str, Any], *, graph: str | None = None, contexts: JsonLdContexts | None = None
) -> str:
    """Return the record as N-Quads: sorted lines, each ending in a newline.

    ``graph`` names the graph every triple is put in (see the module docstring); ``contexts``
    serves the remote contexts the record names (the shipped contexts alone when None). Raises
    :class:`NQuadsError` when JSON-LD processing fails (e.g. a context not served).
    """
    served = contexts if contexts is not None else shipped_contexts()
    body = {key: value for key, value in record.items() if key != "@context"}
    document: dict[str, Any] = {"@graph": [body]}
    if "@context" in record:
        document["@context"] = record["@context"]
    if graph and _ABSOLUTE_IRI.match(graph):
        document["@id"] = graph
    try:
        text = jsonld.to_rdf(document, served.pyld_options(format=NQUADS_MEDIA_TYPE))
    except jsonld.JsonLdError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NQuadsError(f"the record could not be turned into RDF: {first_line}") from exc
    lines = sorted({line for line in str(text).splitlines() if line.strip()})
    return "".join(f"{line}\n" for line in lines)
