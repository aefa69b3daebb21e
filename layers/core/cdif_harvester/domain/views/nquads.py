"""The N-Quads view of a CDIF record, for loading into a triple store.

:func:`record_nquads` turns the record's JSON-LD into RDF with pyld's ``to_rdf`` and the offline
document loader of the contexts given
(:class:`~cdif_harvester.domain.records.contexts.JsonLdContexts`): nothing is ever fetched. Every
triple goes in the named graph of the record, lines sorted and unique, so the same record always
gives the same bytes. The expansion, most of ``to_rdf``'s time, is done by the fast JSON-LD path
(:mod:`~cdif_harvester.domain.records.jsonld_fast`) when it accepts the record; pyld's own
node map and serialisation do the rest, so both paths give the same bytes.

See docs/decisions/0038-nquads-view.md and 0077-local-speed-and-memory.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from cdif_harvester.domain.records import jsonld_fast
from cdif_harvester.domain.records.contexts import JsonLdContexts, shipped_contexts
from cdif_harvester.errors import PermanentError

__all__ = ["NQUADS_MEDIA_TYPE", "NQuadsError", "record_nquads"]

NQUADS_MEDIA_TYPE = "application/n-quads"

# pyld's to_rdf reads the record without a base IRI (relative IRIs stay relative, and are then
# left out); the fast expansion needs one, so it is given one no record can hold, and any output
# that shows it sends the record to pyld.
_NO_BASE = "http://no-base.invalid/"

_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]+$")


class NQuadsError(PermanentError):
    """The record is not JSON-LD that can be turned into RDF (it cannot get better by retry)."""

    reason = "nquads-failed"


def record_nquads(
    record: Mapping[str, Any],
    *,
    graph: str | None = None,
    contexts: JsonLdContexts | None = None,
    fast_path: bool = True,
) -> str:
    """Return the record as N-Quads: sorted lines, each ending in a newline.

    ``graph`` names the graph every triple is put in (see the module docstring); ``contexts``
    serves the remote contexts the record names (the shipped contexts alone when None). Raises
    :class:`NQuadsError` when JSON-LD processing fails (e.g. a context not served).
    ``fast_path=False`` leaves the whole work to pyld (the tests compare both).
    """
    # (pyld is imported by the calls that use it: the handlers that only import this module,
    # through closing a run, do not load it on a cold start)
    from pyld import jsonld  # noqa: PLC0415

    served = contexts if contexts is not None else shipped_contexts()
    body = {key: value for key, value in record.items() if key != "@context"}
    document: dict[str, Any] = {"@graph": [body]}
    if "@context" in record:
        document["@context"] = record["@context"]
    if graph and _ABSOLUTE_IRI.match(graph):
        document["@id"] = graph
    expanded = _fast_expansion(document, served) if fast_path else None
    try:
        if expanded is not None:
            text = _expanded_to_nquads(expanded)
        else:
            text = jsonld.to_rdf(document, served.pyld_options(format=NQUADS_MEDIA_TYPE))
    except jsonld.JsonLdError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NQuadsError(f"the record could not be turned into RDF: {first_line}") from exc
    lines = sorted({line for line in str(text).splitlines() if line.strip()})
    return "".join(f"{line}\n" for line in lines)


def _fast_expansion(document: Mapping[str, Any], served: JsonLdContexts) -> list[Any] | None:
    """The document expanded by the fast path, or None when pyld must do it."""
    expanded = jsonld_fast.expand(document, base=_NO_BASE, contexts=served.processed)
    if expanded is None or _NO_BASE in json.dumps(expanded):
        return None
    return expanded


def _expanded_to_nquads(expanded: list[Any]) -> str:
    """What pyld's ``to_rdf`` does after its expansion step, with its defaults."""
    from pyld import jsonld  # noqa: PLC0415 - see record_nquads

    processor = jsonld.JsonLdProcessor()
    issuer = jsonld.IdentifierIssuer("_:b")
    node_map: dict[str, Any] = {"@default": {}}
    processor._create_node_map(expanded, node_map, "@default", issuer)  # noqa: SLF001
    options = {
        "produceGeneralizedRdf": False,
        "rdfDirection": None,
        "processingMode": "json-ld-1.1",
    }
    dataset = {
        name: processor._graph_to_rdf(graph, issuer, options)  # noqa: SLF001
        for name, graph in sorted(node_map.items())
        if name == "@default" or jsonld._is_absolute_iri(name)  # noqa: SLF001
    }
    return str(processor.to_nquads(dataset))
