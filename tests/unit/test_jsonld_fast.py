"""The fast JSON-LD path gives exactly what pyld gives, or declines.

Every input goes through both paths: ``jsonld_fast.expand`` against ``pyld.jsonld.expand`` (the
same prepared document, base and default context), ``jsonld_fast.compact`` against
``pyld.jsonld.compact`` with the CDIF context, and the whole of ``normalise`` with and without
the fast path. Outputs must be identical to the byte once serialised (key order included), or
the fast path must have declined. Inputs: the golden documents, the reference corpus (skipped
when absent), the benchmark's generated landing pages, randomly generated documents and
random mutations of the real ones. Other tests pin down what the fast path declines.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import random
import sys
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pyld import jsonld

from cdif_harvester.domain.records import jsonld_fast, jsonld_loader
from cdif_harvester.domain.records.contexts import JsonLdContexts
from cdif_harvester.domain.records.extraction import find_jsonld_scripts, has_dataset, parse_jsonld
from cdif_harvester.domain.records.normalisation import (
    NormalisationError,
    _https_to_http,
    _prepare,
    _top_nodes,
    _walk_nodes,
    normalise,
)

GOLDEN = Path(__file__).parent / "golden" / "normalisation"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "extraction_bench.py"
DOCUMENT_URL = "https://pub.example/a/page.html#frag"
BASE = "https://pub.example/a/page.html"


# --- the two paths ----------------------------------------------------------------------


def _pyld_expand(prepared: Any, has_context: bool) -> Any:
    options: dict[str, Any] = {"documentLoader": jsonld_loader.document_loader, "base": BASE}
    if not has_context:
        options["expandContext"] = {"@context": jsonld_loader.schema_org_context()}
    try:
        return jsonld.expand(prepared, options)
    except Exception as exc:  # pyld raises more than JsonLdError on odd input
        return f"pyld raised {type(exc).__name__}"


def _pyld_compact(node: Any) -> Any:
    try:
        return jsonld.compact(
            node,
            jsonld_loader.CDIF_CONTEXT_URL,
            {"documentLoader": jsonld_loader.document_loader, "skipExpansion": True},
        )
    except Exception as exc:
        return f"pyld raised {type(exc).__name__}"


def _outcome(document: Any, fast_path: bool) -> Any:
    try:
        results = normalise(copy.deepcopy(document), document_url=DOCUMENT_URL, fast_path=fast_path)
    except NormalisationError as exc:
        return ["error", exc.reason, str(exc)]
    except Exception as exc:
        return ["raised", type(exc).__name__]
    return [dataclasses.asdict(result) for result in results]


@dataclasses.dataclass
class Tally:
    """How many inputs each path handled, so that a test proves something."""

    expanded: int = 0
    declined: int = 0
    compacted: int = 0
    compaction_declined: int = 0
    ordered: int = 0


def _expanded_nodes(expanded: Any) -> Iterator[dict[str, Any]]:
    stack = [expanded]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if "@value" not in item and "@list" not in item and set(item) != {"@id"}:
                yield item
            stack.extend(v for k, v in item.items() if k not in ("@id", "@type"))


def check_both_paths(document: Any, tally: Tally) -> None:
    """Assert that the fast path agrees with pyld on ``document`` (or declines)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # pyld warns about "@"-terms it ignores
        notes: list[str] = []
        if isinstance(document, dict | list):
            prepared, has_context = _prepare(document, notes)
            before = json.dumps(prepared)
            fast = jsonld_fast.expand(prepared, base=BASE, default_context=not has_context)
            assert json.dumps(prepared) == before, "the fast path altered its input"
            slow = _pyld_expand(prepared, has_context)
            if fast is None:
                tally.declined += 1
            else:
                tally.expanded += 1
                assert json.dumps(fast) == json.dumps(slow), (document, fast, slow)
                # and with https://schema.org/ mapped in the same walk, as normalisation wants
                mapped = jsonld_fast.expand_schema_http(
                    prepared, base=BASE, default_context=not has_context
                )
                assert mapped is not None
                assert json.dumps([mapped.nodes, mapped.mapped]) == json.dumps(
                    _https_to_http(slow)
                ), document
                if mapped.identified is not None:  # the nodes the index walk would find
                    walked = [
                        node
                        for node in _walk_nodes(_top_nodes(mapped.nodes))
                        if isinstance(node.get("@id"), str) and set(node) != {"@id"}
                    ]
                    assert [id(n) for n in mapped.identified] == [id(n) for n in walked]
                    tally.ordered += 1
            if isinstance(slow, list):
                for node in _expanded_nodes(slow):
                    compacted = jsonld_fast.compact(node)
                    if compacted is None:
                        tally.compaction_declined += 1
                        continue
                    tally.compacted += 1
                    assert json.dumps(compacted) == json.dumps(_pyld_compact(node)), node
        assert json.dumps(_outcome(document, True)) == json.dumps(_outcome(document, False))


# --- inputs -----------------------------------------------------------------------------


def _golden_inputs() -> list[Any]:
    return [
        json.loads(path.read_text(encoding="utf-8")) for path in sorted(GOLDEN.glob("*.input.json"))
    ]


@cache
def _bench_documents(pages: int = 48) -> tuple[str, ...]:
    """The JSON-LD blocks of the benchmark's generated landing pages (all seven publishers,
    one of them writing CDIF 1.1 records)."""
    spec = importlib.util.spec_from_file_location("extraction_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    texts = []
    for page in bench.generate(pages):
        texts.extend(
            json.dumps(parse_jsonld(block.text).data) for block in find_jsonld_scripts(page.html)
        )
    return tuple(texts)


def _corpus_documents(corpus: Path) -> list[Any]:
    found = []
    for path in sorted(corpus.rglob("*.json*")):
        if path.name.startswith("resolvedSchema") or "Structured" in path.name:
            continue  # JSON Schemas, not JSON-LD
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except ValueError:
            continue
    return found


# --- the agreement tests ----------------------------------------------------------------


def test_golden_documents_agree_and_take_the_fast_path() -> None:
    tally = Tally()
    for document in _golden_inputs():
        check_both_paths(document, tally)
    assert tally.declined == 0
    assert tally.compaction_declined == 0
    assert tally.compacted > 20


def test_corpus_documents_agree(corpus: Path) -> None:
    tally = Tally()
    documents = _corpus_documents(corpus)
    assert len(documents) > 20
    for document in documents:
        check_both_paths(document, tally)
    # Only the framing document (@embed) and one record using @reverse are beyond the fast path
    assert tally.declined <= 2
    assert tally.expanded >= len(documents) - 2


def test_cdif_11_examples_agree(cdif_11: Path) -> None:
    # The official CDIF 1.1 examples: normalised (1.1 shapes, 1.1 prefixes) alike on both paths
    tally = Tally()
    documents = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(cdif_11.glob("*/*/example*.json"))
    ]
    assert len(documents) > 20
    for document in documents:
        check_both_paths(document, tally)
    assert tally.expanded >= len(documents) - 4


def test_benchmark_pages_agree_and_take_the_fast_path() -> None:
    tally = Tally()
    texts = _bench_documents()
    assert len(texts) > 48
    assert any("https://w3id.org/cdif/core/1.1" in text for text in texts)  # 1.1 records too
    for text in texts:
        check_both_paths(json.loads(text), tally)
    assert tally.declined == 0
    assert tally.compaction_declined == 0


# --- random documents -------------------------------------------------------------------

_CONTEXTS: list[Any] = [
    "https://schema.org",
    "https://schema.org/",
    "http://schema.org",
    "http://schema.org/",
    "https://schema.org/docs/jsonldcontext.jsonld",
    {"@vocab": "https://schema.org/"},
    {"@vocab": "http://schema.org/"},
    {"@vocab": "http://schema.org/", "id": "@id", "type": "@type"},
    {"schema": "http://schema.org/", "dcterms": "http://purl.org/dc/terms/"},
    {"schema": "https://schema.org/", "dcat": "http://www.w3.org/ns/dcat#"},
    {"ex": "https://example.org/ns/", "thing": "ex:thing", "@vocab": "https://schema.org/"},
    {"name": "schema:name", "schema": "http://schema.org/"},
    {"title": {"@id": "http://purl.org/dc/terms/title"}, "@version": 1.1},
    {"sdo": "https://schema.org/", "label": "sdo:name", "Dataset": "sdo:Dataset"},
    {"@vocab": "http://schema.org/", "creator": "http://purl.org/dc/terms/creator"},
    {"ex": {"@id": "https://example.org/ns/"}},  # not a prefix (expanded definition)
    {"ex": "https://example.org/ns#frag"},  # does not end in a gen-delim: not a prefix
    {"a": "b", "b": "c", "c": "http://example.org/c"},
    {
        "https": "http://example.org/trap/",
        "_": "http://example.org/blank/",
        "@vocab": "http://schema.org/",
    },
    [],
    {},
]
_HARD_CONTEXTS: list[Any] = [  # beyond the fast path: pyld must do it
    {"url": {"@id": "http://schema.org/url", "@type": "@id"}},
    {"keywords": {"@id": "http://schema.org/keywords", "@container": "@set"}},
    {"creator": {"@id": "http://schema.org/creator", "@container": "@list"}},
    {"@vocab": "http://schema.org/", "@language": "en"},
    {"@vocab": "http://schema.org/", "@base": "https://base.example/dir/"},
    {"isPartOf": {"@reverse": "http://schema.org/hasPart"}},
    {"@protected": True, "name": "http://schema.org/name"},
    None,
    {"a": "b", "b": "a"},
    {"schema:name": {"@id": "http://schema.org/name"}},
    {"@vocab": "relative/"},
    {"value": "@value", "@vocab": "http://schema.org/"},
    5,
]
_KEYS = (
    "name", "description", "schema:name", "http://schema.org/name", "https://schema.org/name",
    "sdo:name", "ex:thing", "thing", "title", "label", "id", "type", "@id", "@type", "creator",
    "about", "subjectOf", "itemListElement", "item", "position", "identifier", "url", "keywords",
    "unknown key", "@foo", "_:prop", "urn:x:y", "dcterms:conformsTo", "additionalType",
    "distribution", "encoding", "schemaVersion", "license", "@graph", "schema",
    "http://schema.org/", "a", "value",
)  # fmt: skip
_RARE_KEYS = (
    "@set", "@reverse", "@index", "@nest", "@included", "@direction", "@list", "@value",
    "@language",
)  # fmt: skip
_IDS = (
    "https://doi.org/10.1/x", "https://doi.org/10.1/y", "#frag", "rel/path", "../up", "ex:local",
    "_:b1", "doi:null", "urn:uuid:1", "schema:Thing", "http://schema.org/", "",
    "https://pub.example/a/page.html#metadata", "schema:", " https://x.example/ ", "?q=1",
)  # fmt: skip
_TYPES = (
    "Dataset", "schema:Dataset", "http://schema.org/Dataset", "https://schema.org/Dataset",
    "DigitalDocument", "dcat:CatalogRecord", "ItemList", "ListItem", "Person", "ex:Custom",
    "Unknown Type", "sdo:Dataset", "_:t", "Dataset", "a", "schema",
)  # fmt: skip
_SCALARS = (
    "text",
    "",
    "https://x.example/a",
    "2024-01-02",
    7,
    2.5,
    True,
    False,
    None,
    "dcat:CatalogRecord",
)


def _random_context(rng: random.Random) -> Any:
    return rng.choice(_HARD_CONTEXTS if rng.random() < 0.1 else _CONTEXTS)


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.35:
        return rng.choice(_SCALARS)
    if roll < 0.55:
        return _random_node(rng, depth + 1)
    if roll < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.78:
        value: dict[str, Any] = {"@value": rng.choice(_SCALARS)}
        extra = rng.random()
        if extra < 0.3:
            value["@language"] = rng.choice(("EN", "de", None, "fr-CA"))
        elif extra < 0.6:
            value["@type"] = rng.choice(
                ("xsd:date", "http://www.w3.org/2001/XMLSchema#date", "Date")
            )
        elif extra < 0.65:  # invalid: pyld refuses these
            value[rng.choice(("@language", "@type"))] = rng.choice((5, ["Date"], "@id"))
        return value
    if roll < 0.86:
        return {"@id": rng.choice(_IDS)}
    if roll < 0.95:
        return {"@list": [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]}
    return [[rng.choice(_SCALARS)]]


def _random_node(rng: random.Random, depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    if rng.random() < 0.7:
        node["@type"] = rng.choice(_TYPES) if rng.random() < 0.7 else rng.sample(_TYPES, 2)
    if rng.random() < 0.6:
        node["@id"] = rng.choice(_IDS)
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(_RARE_KEYS if rng.random() < 0.04 else _KEYS)
        invalid = rng.random() < 0.05
        if key in ("@id", "id"):
            node[key] = rng.choice((5, None, "@graph")) if invalid else rng.choice(_IDS)
        elif key in ("@type", "type"):
            node[key] = rng.choice((7, None, "@id")) if invalid else rng.choice((*_TYPES, []))
        elif key == "@graph":
            node[key] = [_random_node(rng, depth + 1) for _ in range(rng.randint(0, 2))]
        else:
            node[key] = _random_value(rng, depth)
    if depth > 0 and rng.random() < 0.08:
        node["@context"] = _random_context(rng)
    return node


def _random_document(rng: random.Random) -> Any:
    shape = rng.random()
    if shape < 0.5:
        document: Any = _random_node(rng, 0)
        document.setdefault("@type", "Dataset")
    elif shape < 0.75:
        document = {"@graph": [_random_node(rng, 1) for _ in range(rng.randint(1, 4))]}
    else:
        document = [_random_node(rng, 1) for _ in range(rng.randint(1, 3))]
    tops = document if isinstance(document, list) else [document]
    for top in tops:
        roll = rng.random()
        if roll < 0.75:
            top["@context"] = _random_context(rng)
        elif roll < 0.9:
            top["@context"] = [_random_context(rng) for _ in range(rng.randint(1, 3))]
    return document


def test_random_documents_agree() -> None:
    tally = Tally()
    rng = random.Random(20261121)
    for _ in range(500):
        check_both_paths(_random_document(rng), tally)
    # Both outcomes occur often enough for the comparison to mean something
    assert tally.expanded > 250
    assert tally.declined > 50
    assert tally.compacted > 400


# --- mutations of real documents --------------------------------------------------------


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*path, key))
    elif isinstance(value, list):
        for number, child in enumerate(value):
            yield from _paths(child, (*path, number))


def _mutate(rng: random.Random, document: Any) -> Any:
    document = copy.deepcopy(document)
    paths = list(_paths(document))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        if not path:
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        value = parent[last]
        move = rng.randrange(10)
        if move == 0 and isinstance(last, str) and not last.startswith("@"):
            name = last.split(":")[-1]
            spellings = (
                f"schema:{name}",
                f"http://schema.org/{name}",
                f"https://schema.org/{name}",
            )
            parent[rng.choice((*spellings, name))] = parent.pop(last)
        elif move == 1:
            parent[last] = None
        elif move == 2:
            parent[last] = [value]
        elif move == 3 and isinstance(value, list) and value:
            parent[last] = value[0]
        elif move == 4 and isinstance(value, str):
            parent[last] = (
                {"@value": value, "@language": "EN"}
                if rng.random() < 0.5
                else {"@value": value, "@type": "xsd:string"}
            )
        elif move == 5 and isinstance(value, dict):
            value["@context"] = _random_context(rng)
        elif move == 6 and isinstance(value, dict) and "@id" in value:
            parent[last] = {"@id": value["@id"]}
        elif move == 7 and isinstance(parent, dict):
            del parent[last]
        elif move == 8 and isinstance(value, list | dict):
            parent[last] = {"@list": value if isinstance(value, list) else [value]}
        elif move == 9 and isinstance(value, dict) and isinstance(document, dict):
            document.setdefault("@graph", []).append(copy.deepcopy(value))
        if isinstance(document, dict) and rng.random() < 0.2:
            document["@context"] = _random_context(rng)
        paths = list(_paths(document))
    return document


def test_mutated_documents_agree() -> None:
    tally = Tally()
    rng = random.Random(5)
    sources = _golden_inputs() + [json.loads(text) for text in _bench_documents()[:24]]
    for _ in range(300):
        check_both_paths(_mutate(rng, rng.choice(sources)), tally)
    assert tally.expanded > 100
    assert tally.declined > 10


# --- what the fast path declines, and that pyld then gives its own answer ----------------

_DATASET = {
    "@type": "Dataset",
    "@id": "https://doi.org/10.1/x",
    "name": "n",
    "url": "https://x.example/",
}


@pytest.mark.parametrize(
    "context",
    [
        {"url": {"@id": "http://schema.org/url", "@type": "@id"}},
        {
            "name": {
                "@id": "http://schema.org/name",
                "@type": "http://www.w3.org/2001/XMLSchema#string",
            }
        },
        {"keywords": {"@id": "http://schema.org/keywords", "@container": "@set"}},
        {"creator": {"@id": "http://schema.org/creator", "@container": "@list"}},
        {"name": {"@id": "http://schema.org/name", "@container": "@language"}},
        {"isPartOf": {"@reverse": "http://schema.org/hasPart"}},
        {"@protected": True, "name": "http://schema.org/name"},
        {"name": {"@id": "http://schema.org/name", "@protected": True}},
        {
            "Dataset": {
                "@id": "http://schema.org/Dataset",
                "@context": {"name": "http://purl.org/dc/terms/title"},
            }
        },
        {"name": {"@id": "http://schema.org/name", "@language": "en"}},
        {"ex": {"@id": "https://example.org/", "@prefix": True}},
        {"name": {"@id": "http://schema.org/name", "@nest": "@nest"}},
        {"@language": "en"},
        {"@base": "https://base.example/"},
        {"@import": "https://schema.org"},
        {"@propagate": False},
        {"@direction": "ltr"},
        {"@version": 1.0},
        {"name": None},
        {"schema:name": "http://schema.org/name"},
        {"a/b": "http://schema.org/name"},
        {"a": "b", "b": "a"},
        {"graph": "@graph"},
        {"@vocab": "relative"},
        {"@vocab": None},
        None,
        "https://vocab.example.org/not-served.jsonld",
        ["https://schema.org", {"url": {"@type": "@id"}}],
    ],
)
def test_contexts_beyond_the_fast_path_are_declined(context: Any) -> None:
    # Given a Dataset read with a context the fast path does not implement
    document = {"@context": ["https://schema.org", context], **_DATASET}
    # Then the fast path declines, says why, and normalise gives pyld's answer
    assert jsonld_fast.expand(document, base=BASE) is None
    assert jsonld_fast.decline_reason(document, base=BASE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        assert json.dumps(_outcome(document, True)) == json.dumps(_outcome(document, False))


@pytest.mark.parametrize(
    "extra",
    [
        {"keywords": {"@set": ["a", "b"]}},
        {"@reverse": {"http://schema.org/hasPart": {"@id": "https://x.example/p"}}},
        {"@index": "i"},
        {"@included": [{"@id": "https://x.example/i", "name": "i"}]},
        {"@nest": {"name": "m"}},
        {"description": {"@value": {"a": 1}, "@type": "@json"}},
        {"description": {"@value": "x", "@direction": "ltr"}},
        {"description": {"@value": None}},
        {"creator": {"@list": [["nested"]]}},
        {"creator": {"@list": None}},
        {"@language": "en"},
        {"id": "https://doi.org/10.1/again"},  # a second @id: pyld rejects it
        {"@type": 5},
        {"description": {"@value": "x", "@type": ["http://x.example/t"]}},
        {"description": {"@value": "x", "@type": "_:blank"}},
        {"description": {"@value": 5, "@language": "en"}},
        {"description": {"@value": "x", "name": "y"}},
        {"@graph": "not an object"},
    ],
)
def test_nodes_beyond_the_fast_path_are_declined(extra: dict[str, Any]) -> None:
    document = {"@context": {"@vocab": "http://schema.org/", "id": "@id"}, **_DATASET, **extra}
    assert jsonld_fast.expand(document, base=BASE) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        assert json.dumps(_outcome(document, True)) == json.dumps(_outcome(document, False))


@pytest.mark.parametrize(
    "node",
    [
        {
            "@id": "https://x.example/a",
            "@reverse": {"http://schema.org/hasPart": [{"@id": "https://x.example/b"}]},
        },
        {
            "@id": "https://x.example/a",
            "http://schema.org/p": [{"@graph": [{"@id": "https://x.example/c"}]}],
        },
        {"@id": "https://x.example/a", "http://schema.org/p": [{"@value": "x", "@index": "i"}]},
        {
            "@id": "https://x.example/a",
            "http://schema.org/p": [{"@value": "x", "@direction": "ltr"}],
        },
        {"@id": "https://x.example/a", "@type": ["http://schema.org/"]},  # would pick the term
        {"@id": "https://x.example/a", "schema:name": [{"@value": "x"}]},  # confusable IRI
        {"@id": "https://x.example/a", "http://schema.org/p": [{"@list": [{"@list": []}]}]},
        {"@value": "x"},
    ],
)
def test_compaction_beyond_the_fast_path_is_declined(node: dict[str, Any]) -> None:
    assert jsonld_fast.compact(node) is None


# --- caching ----------------------------------------------------------------------------


def test_processed_contexts_are_kept_for_the_life_of_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[Any] = []
    process = jsonld_fast._process_object

    def counting(parent: Any, local: dict[str, Any]) -> Any:
        calls.append(local)
        return process(parent, local)

    monkeypatch.setattr(jsonld_fast, "_process_object", counting)
    context = {"@vocab": "http://schema.org/", "cachetest": "http://example.org/cache-test"}
    for number in range(3):
        document = {"@context": context, "@type": "Dataset", "name": f"n{number}"}
        assert jsonld_fast.expand(document, base=BASE) is not None
    assert calls == [context]


def test_registering_a_context_is_seen_by_the_fast_path() -> None:
    contexts = JsonLdContexts()
    url = "https://vocab.example.org/trusted.jsonld"
    document = {"@context": ["https://schema.org", url], "@type": "Dataset", "word": "w"}
    processed = contexts.processed
    assert jsonld_fast.expand(document, base=BASE, contexts=processed) is None  # not served yet
    contexts.register(url, {"@context": {"word": "http://example.org/one"}})
    (first,) = jsonld_fast.expand(document, base=BASE, contexts=processed) or [None]
    assert "http://example.org/one" in first
    contexts.register(url, {"@context": {"word": "http://example.org/two"}})
    (second,) = jsonld_fast.expand(document, base=BASE, contexts=processed) or [None]
    assert "http://example.org/two" in second


def test_bench_documents_hold_datasets() -> None:
    # The benchmark's blocks used above are what the extractor normalises
    assert sum(has_dataset(json.loads(text)) for text in _bench_documents()) == 48


@pytest.mark.parametrize(
    "document",
    [
        {  # two keys name one property, with a third key between them
            "@context": {"@vocab": "http://schema.org/", "schema": "http://schema.org/"},
            "@type": "Dataset",
            "creator": {"@id": "https://x.example/a", "name": "a"},
            "description": {"@id": "https://x.example/b", "name": "b"},
            "schema:creator": {"@id": "https://x.example/c", "name": "c"},
        },
        {  # the same once https://schema.org/ is written as http
            "@context": {"@vocab": "https://schema.org/", "h": "http://schema.org/"},
            "@type": "Dataset",
            "creator": {"@id": "https://x.example/a", "name": "a"},
            "description": {"@id": "https://x.example/b", "name": "b"},
            "h:creator": {"@id": "https://x.example/c", "name": "c"},
        },
        [  # a list of nodes dropped at the top, holding a node
            {
                "@context": "https://schema.org",
                "@list": [{"@id": "https://x.example/l", "name": "l"}],
            },
            {"@context": "https://schema.org", "@type": "Dataset", "@id": "https://x.example/d"},
        ],
    ],
)
def test_the_recorded_node_order_is_the_walk_order_or_none(document: Any) -> None:
    tally = Tally()
    check_both_paths(document, tally)
    assert tally.expanded == 1


_UNSERVED = "https://vocab.example.org/not-served.jsonld"


@pytest.mark.parametrize(
    "document",
    [
        {"@context": "https://schema.org", "@type": "Dataset", "@id": "", "name": "x"},
        {
            "@context": "https://schema.org",
            "@type": "Dataset",
            "creator": {"@id": "  ", "name": "p"},
        },
        {  # a key no context maps holds what preparation removes
            "@context": {"schema": "http://schema.org/"},
            "@type": "schema:Dataset",
            "@id": "https://x.example/d",
            "stray": {"@id": 5, "@context": _UNSERVED, "inner": [{"@id": ""}]},
        },
        {
            "@context": "https://schema.org",
            "@type": "Dataset",
            "creator": {"@context": None, "name": "p"},
        },
        {
            "@context": "https://schema.org",
            "@type": "Dataset",
            "creator": {"@context": [], "name": "p"},
        },
        {
            "@context": "https://schema.org",
            "@type": "Dataset",
            "creator": {"@context": [_UNSERVED, {"x": "http://x.example/"}], "x:p": "p"},
        },
        {  # no context at the top, one a level down: read without the default context
            "@type": "Dataset",
            "@id": "https://x.example/d",
            "creator": {"@context": {"@vocab": "http://schema.org/"}, "name": "p"},
        },
        {  # no context at the top, one two levels down: read with the default context
            "@type": "Dataset",
            "@id": "https://x.example/d",
            "distribution": [{"@context": {"@vocab": "http://schema.org/"}, "name": "p"}],
        },
        [
            {"@type": "Dataset", "@id": "https://x.example/a", "name": "a"},
            {"@context": "https://schema.org", "@type": "Dataset", "@id": "https://x.example/b"},
        ],
        {"@context": "https://schema.org", "@type": "Dataset", "@id": {"@context": _UNSERVED}},
        {"@context": _UNSERVED, "@type": "Dataset", "@id": "https://x.example/d"},
    ],
)
def test_documents_the_normaliser_prepares_first_agree(document: Any) -> None:
    # The fast path reads documents unprepared: where preparing changes them, it must decline
    # so that normalise prepares them first (notes included)
    check_both_paths(document, Tally())
    prepared_notes: list[str] = []
    _prepare(document, prepared_notes)
    if prepared_notes:
        assert jsonld_fast.expand_schema_http(document, base=BASE, raw=True) is None


def test_a_full_context_cache_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonld_fast, "_CHILD_LIMIT", 2)
    processed = jsonld_fast.ProcessedContexts(jsonld_loader.served_document)  # a fresh cache
    for number in range(5):
        context = {"@vocab": "http://schema.org/", "t": f"http://example.org/t{number}"}
        document = {"@context": context, "@type": "Dataset", "t": "v"}
        (node,) = jsonld_fast.expand(document, base=BASE, contexts=processed) or [None]
        assert node[f"http://example.org/t{number}"] == [{"@value": "v"}]
        assert len(processed.root(False).children) <= 2
