"""Finding and parsing JSON-LD blocks (golden page in, expected blocks out)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records import extraction
from cdif_harvester.domain.records.extraction import (
    MAX_JSON_DEPTH,
    MAX_SCRIPTS,
    ExtractionError,
    JsonLdBlock,
    JsonTooDeep,
    find_jsonld_scripts,
    has_dataset,
    parse_jsonld,
    read_jsonld_scripts,
)
from cdif_harvester.errors import PermanentError

GOLDEN = Path(__file__).parent / "golden" / "extraction"


def _summarise(block: JsonLdBlock) -> dict[str, Any]:
    summary: dict[str, Any] = {"index": block.index, "profile": block.profile}
    try:
        parsed = parse_jsonld(block.text)
    except ExtractionError as exc:
        summary.update(error=exc.reason, message=str(exc))
        return summary
    summary.update(has_dataset=has_dataset(parsed.data), repairs=list(parsed.repairs))
    return summary


def test_page_with_several_blocks_matches_golden() -> None:
    # Given a page with four JSON-LD blocks (one Organization, one needing repairs, one wrapped
    # in an HTML comment inside a <div>, one broken) and a JavaScript block
    page = (GOLDEN / "page_several_blocks.html").read_bytes()
    # When the blocks are found and parsed
    summaries = [_summarise(block) for block in find_jsonld_scripts(page)]
    # Then they match the expected output, in document order
    expected = json.loads((GOLDEN / "page_several_blocks.expected.json").read_text())
    assert summaries == expected


def test_script_type_is_case_insensitive_and_profile_is_captured() -> None:
    html = (
        b'<script type="APPLICATION/ld+json;profile=https://w3id.org/cdif/core/1.0">{}</script>'
        b'<script type="application/json">{}</script>'
        b'<script type="application/ld+json" profile="https://p.example/x">[]</script>'
    )
    blocks = find_jsonld_scripts(html)
    assert [(b.index, b.profile, b.text) for b in blocks] == [
        (0, "https://w3id.org/cdif/core/1.0", "{}"),
        (1, "https://p.example/x", "[]"),
    ]


@pytest.mark.parametrize("html", [b"", b"   ", b"<html><body>no scripts</body>", b"\x00\xff<<<"])
def test_pages_without_blocks_give_an_empty_list(html: bytes) -> None:
    assert find_jsonld_scripts(html) == []


@pytest.mark.parametrize(
    ("text", "repairs"),
    [
        ('{"a": 1}', ()),
        ('\ufeff{"a": 1}', ("stripped byte order mark",)),
        ('<![CDATA[{"a": 1}]]>', ("removed CDATA or HTML comment wrapper",)),
        ('<!-- {"a": 1} -->', ("removed CDATA or HTML comment wrapper",)),
        ("{&quot;a&quot;: 1}", ("unescaped HTML entities",)),
        ('{"a": 1,}', ("removed trailing commas",)),
        ('{"a": [1, 2,\n ],\n}', ("removed trailing commas",)),
        (
            "\ufeff<!--{&quot;a&quot;: 1,}-->",
            (
                "stripped byte order mark",
                "removed CDATA or HTML comment wrapper",
                "unescaped HTML entities",
                "removed trailing commas",
            ),
        ),
    ],
)
def test_parse_jsonld_repairs_and_records_them(text: str, repairs: tuple[str, ...]) -> None:
    parsed = parse_jsonld(text)
    assert parsed.data in ({"a": 1}, {"a": [1, 2]})
    assert parsed.repairs == repairs


@pytest.mark.parametrize(
    ("text", "data", "repairs"),
    [
        (
            '{"a": 1, // the first\n "b": "https://x.org/y" /* a "quoted" note */}',
            {"a": 1, "b": "https://x.org/y"},
            ("removed comments",),
        ),
        ('{"a": "a // b /* c */"}/* x */', {"a": "a // b /* c */"}, ("removed comments",)),
        (
            '{"a": "line one\nline two\ttab\u0001"}',
            {"a": "line one\nline two\ttab\u0001"},
            ("escaped control characters in strings",),
        ),
        ('{"a": 1}}', {"a": 1}, ("removed a stray closing brace or bracket",)),
        ('{"a": [1, 2]}]\n', {"a": [1, 2]}, ("removed a stray closing brace or bracket",)),
        (
            '{"a": {"b": 1}}, "c": "}"}',
            {"a": {"b": 1}, "c": "}"},
            ("removed a stray closing brace or bracket",),
        ),
        (
            '{"a": [1,], // note\n}}',
            {"a": [1]},
            (
                "removed comments",
                "removed trailing commas",
                "removed a stray closing brace or bracket",
            ),
        ),
        # entities belong to the publisher's text unless the body itself was escaped
        (
            '{"a": "R&amp;D &copy", "b": 1,}',
            {"a": "R&amp;D &copy", "b": 1},
            ("removed trailing commas",),
        ),
        (
            "{&quot;a&quot;: &quot;R&amp;amp;D&quot;}",
            {"a": "R&amp;D"},
            ("unescaped HTML entities",),
        ),
    ],
)
def test_more_repairs_are_made_and_recorded(text: str, data: Any, repairs: tuple[str, ...]) -> None:
    parsed = parse_jsonld(text)
    assert (parsed.data, parsed.repairs) == (data, repairs)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1 /* never closed }',
        '{"a":\u0001 1}',
        '{"a": 1};',
        '{"a": 1 "b": 2}}',
    ],
)
def test_what_no_repair_can_save_is_still_refused(text: str) -> None:
    with pytest.raises(ExtractionError):
        parse_jsonld(text)


@pytest.mark.parametrize(
    ("context", "repaired", "repairs"),
    [
        ("https://schema.org", "https://schema.org", ()),
        ("http://schema.org/", "http://schema.org/", ()),
        ("https://example.org/context.jsonld", "https://example.org/context.jsonld", ()),
        (
            "schema.org",
            "https://schema.org/",
            ("@context 'schema.org' read as https://schema.org/",),
        ),
        (
            "HTTPS://WWW.SCHEMA.ORG/",
            "https://schema.org/",
            ("@context 'HTTPS://WWW.SCHEMA.ORG/' read as https://schema.org/",),
        ),
        (
            "//schema.org#",
            "https://schema.org/",
            ("@context '//schema.org#' read as https://schema.org/",),
        ),
        (
            '{"@vocab": "https://schema.org/"}',
            {"@vocab": "https://schema.org/"},
            ("string-valued @context parsed as JSON",),
        ),
        # JSON text holding an array (a context list) is JSON text as well
        (
            '["https://schema.org", {"dct": "http://purl.org/dc/terms/"}]',
            ["https://schema.org", {"dct": "http://purl.org/dc/terms/"}],
            ("string-valued @context parsed as JSON",),
        ),
        (
            ["www.schema.org", {"dct": "http://purl.org/dc/terms/"}],
            ["https://schema.org/", {"dct": "http://purl.org/dc/terms/"}],
            ("@context 'www.schema.org' read as https://schema.org/",),
        ),
        ('{"@vocab": broken', '{"@vocab": broken', ()),
    ],
)
def test_string_context_that_means_schema_org_is_repaired(
    context: Any, repaired: Any, repairs: tuple[str, ...]
) -> None:
    document = {"@context": context, "@type": "Dataset", "name": "x"}
    parsed = parse_jsonld(json.dumps(document))
    assert parsed.data == {**document, "@context": repaired}
    assert parsed.repairs == repairs


def test_context_repair_reaches_top_level_nodes_only() -> None:
    text = json.dumps(
        [
            {"@context": "schema.org", "@type": "Dataset"},
            {"@type": "Dataset", "about": {"@context": "schema.org"}},
        ]
    )
    parsed = parse_jsonld(text + "]")  # a text repair and the context repair, both recorded
    assert parsed.data[0]["@context"] == "https://schema.org/"
    assert parsed.data[1]["about"]["@context"] == "schema.org"
    assert parsed.repairs == (
        "removed a stray closing brace or bracket",
        "@context 'schema.org' read as https://schema.org/",
    )


def test_trailing_comma_inside_a_string_is_kept() -> None:
    parsed = parse_jsonld('{"a": "x,}", "b": [1,],}')
    assert parsed.data == {"a": "x,}", "b": [1]}


def test_parse_jsonld_accepts_bytes() -> None:
    assert parse_jsonld(b'\xef\xbb\xbf{"name": "caf\xc3\xa9"}').data == {"name": "café"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1 "b": 2}', "line 1, column 9"),
        ('{\n  "a": 1,\n  "b" 2\n}', "line 3, column 7"),
        ("", "empty"),
    ],
)
def test_unrepairable_json_raises_a_permanent_error_with_position(text: str, where: str) -> None:
    with pytest.raises(ExtractionError) as caught:
        parse_jsonld(text)
    assert isinstance(caught.value, PermanentError)
    assert caught.value.reason == "malformed-json"
    assert where in str(caught.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"@type": "Dataset"}, True),
        ({"@type": ["schema:Dataset", "schema:CreativeWork"]}, True),
        ({"@type": "https://schema.org/Dataset"}, True),
        ({"type": "http://schema.org/Dataset"}, True),
        ([{"@type": "Organization"}, {"@type": "Dataset"}], True),
        ({"@graph": [{"@type": "Person"}, {"@type": "Dataset"}]}, True),
        ({"@type": "DigitalDocument", "about": {"@type": "Dataset"}}, True),
        ({"@type": "ItemList", "itemListElement": [{"about": {"@type": "Dataset"}}]}, True),
        ({"@type": "Organization"}, False),
        ({"@type": "DatasetX"}, False),
        ({"name": "Dataset"}, False),
        ("Dataset", False),
        (None, False),
    ],
)
def test_has_dataset(data: Any, expected: bool) -> None:
    assert has_dataset(data) is expected


# --- bounds: depth, size, many blocks, undecodable bytes ----------------------------------


def _nested(depth: int) -> str:
    return '{"@type": "Dataset", "a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_json_nested_up_to_the_limit_is_read_and_deeper_is_refused_as_too_deep() -> None:
    assert parse_jsonld(_nested(MAX_JSON_DEPTH)).data["@type"] == "Dataset"
    with pytest.raises(JsonTooDeep) as too_deep:
        parse_jsonld(_nested(MAX_JSON_DEPTH + 1))
    assert too_deep.value.reason == "json-too-deep"
    assert isinstance(too_deep.value, ExtractionError | PermanentError)
    assert str(too_deep.value) == "JSON nested more than 100 levels deep; not read"


@pytest.mark.parametrize("text", ["[" * 5000, "[" * 5000 + "]" * 5000, '{"a":' * 5000])
def test_json_too_deep_for_python_is_too_deep_not_a_recursion_error(text: str) -> None:
    with pytest.raises(JsonTooDeep, match="JSON nested too deeply to be parsed"):
        parse_jsonld(text)


def test_deep_json_needing_a_repair_is_too_deep_as_well() -> None:
    with pytest.raises(JsonTooDeep):
        parse_jsonld(_nested(MAX_JSON_DEPTH + 1)[:-1] + ",}")


def test_a_text_over_the_repair_limit_is_not_repaired_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(extraction, "MAX_REPAIR_CHARS", 20)
    assert parse_jsonld('{"a": 1,}').repairs == ("removed trailing commas",)
    with pytest.raises(ExtractionError) as refused:
        parse_jsonld('{"a": 1, "bbbbbbbbbbbbbbb": 2,}')
    assert str(refused.value) == (
        "malformed JSON-LD at line 1, column 31: Expecting property name enclosed in double "
        "quotes (not repaired: 31 characters, over the 20 the repairs are tried on)"
    )


def test_bytes_that_are_not_utf8_are_read_as_latin1_and_that_is_recorded() -> None:
    parsed = parse_jsonld(b'{"name": "caf\xe9"}')
    assert parsed.data == {"name": "café"}
    assert parsed.repairs == ("decoded as Latin-1: not UTF-8 (byte 13)",)


@pytest.mark.parametrize(
    ("text", "data"),
    [
        # A quote inside a comment opens no string: what follows is still read as JSON.
        ('{"a": 1 /* it\'s "quoted */, "b": "x"}', {"a": 1, "b": "x"}),
        ('{"a": 1, // say "hi\n "b": 2}', {"a": 1, "b": 2}),
        # "//" and "/*" inside strings are text.
        ('{"a": "http://x/*y*/", // c\n "b": 1}', {"a": "http://x/*y*/", "b": 1}),
        # An unterminated comment is kept; the ones before it are still removed.
        ('{"a": 1 /* c */} /* d /* e', None),
    ],
)
def test_comments_are_removed_in_one_pass(text: str, data: Any) -> None:
    if data is None:
        with pytest.raises(ExtractionError, match="Extra data"):
            parse_jsonld(text)
    else:
        assert parse_jsonld(text).data == data


def test_blocks_past_the_cap_are_counted_not_read() -> None:
    page = b'<script type="application/ld+json">{"n": 1}</script>' * (MAX_SCRIPTS + 2)
    scripts = read_jsonld_scripts(page)
    assert len(scripts.blocks) == MAX_SCRIPTS and scripts.unread == 2
    assert scripts.note() == (
        f"too-many-scripts: the page has {MAX_SCRIPTS + 2} JSON-LD blocks; only the first "
        f"{MAX_SCRIPTS} were read"
    )
    assert find_jsonld_scripts(page) == list(scripts.blocks)
    assert read_jsonld_scripts(page[: len(page) // (MAX_SCRIPTS + 2)]).note() is None


def _nesting(value: Any) -> int:
    """How deep arrays and objects nest in a parsed value (the reference: every value walked)."""
    if isinstance(value, dict):
        return 1 + max((_nesting(child) for child in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_nesting(child) for child in value), default=0)
    return 0


def _random_json(rng: random.Random, depth: int) -> Any:
    """Random JSON whose strings hold brackets, quotes and escapes, nested up to ``depth``."""
    pick = rng.randrange(6 if depth else 3)
    if pick == 0:
        return rng.choice(['a"]', "[{", "}\\", '\\"[', "]]]}", "é\u2028", ""])
    if pick == 1:
        return rng.choice([0, -1.5, True, None, 1e10])
    if pick == 2:
        return "plain"
    if pick in (3, 4):
        return {
            rng.choice(["[", "}", "k", '"']) + str(i): _random_json(rng, depth - 1)
            for i in range(rng.randrange(4))
        }
    return [_random_json(rng, depth - 1) for _ in range(rng.randrange(4))]


def test_the_nesting_of_a_json_text_is_that_of_its_values() -> None:
    rng = random.Random(1125)
    for _ in range(3000):
        value = _random_json(rng, rng.randrange(8))
        for text in (json.dumps(value), json.dumps(value, indent=1, ensure_ascii=False)):
            assert extraction._depth_of(json.loads(text)) == _nesting(value), text


@pytest.mark.parametrize("levels", [1, 99, 100, 101, 102, 150])
def test_nesting_is_counted_up_to_one_past_the_most_read(levels: int) -> None:
    text = '{"a": ' * levels + '"[[[{{{"' + "}" * levels
    expected = min(levels, extraction.MAX_JSON_DEPTH + 1)
    assert extraction._depth_of(json.loads(text)) == expected
    assert _nesting(json.loads(text)) >= expected


@pytest.mark.parametrize(
    "page", [b"<!-- only a comment -->", b"<!DOCTYPE html>", b"<?xml version='1.0'?>"]
)
def test_a_page_the_parser_finds_empty_has_no_blocks(page: bytes) -> None:
    assert extraction.read_jsonld_scripts(page) == extraction.JsonLdScripts(blocks=())
    assert find_jsonld_scripts(page) == []


def test_an_empty_script_block_is_read_as_empty_and_refused_as_such() -> None:
    page = b'<html><head><script type="application/ld+json"></script></head></html>'
    (block,) = extraction.read_jsonld_scripts(page).blocks
    assert block.text == ""
    with pytest.raises(ExtractionError, match="the script block or document is empty"):
        parse_jsonld(block.text)


# --- media types and profiles of script blocks --------------------------------------------


def _block_of(script_type: str) -> JsonLdBlock | None:
    page = f"<html><head><script type={script_type!r}>{{}}</script></head></html>".encode()
    blocks = find_jsonld_scripts(page)
    return blocks[0] if blocks else None


@pytest.mark.parametrize(
    ("script_type", "profile"),
    [
        ("application/ld+json", None),
        # CDIF discoverability writes the profile in single quotes (profile='CDIF1.0')
        ("application/ld+json; profile='CDIF1.0'", "CDIF1.0"),
        # a quoted-string parameter value (RFC 9110, 5.6.6)
        ('application/ld+json; profile="CDIF-list-1.0"', "CDIF-list-1.0"),
        # parameter names are case-insensitive; the white space around them is not part of them
        (" Application/LD+JSON ; Profile = 'CDIF1.0' ", "CDIF1.0"),
        # another parameter is not the profile, before it or instead of it
        ("application/ld+json; charset=utf-8", None),
        ("application/ld+json;charset=utf-8;profile=CDIF1.0", "CDIF1.0"),
        ("application/ld+json; profile=", None),
        # the value is everything after the first "=", a query included
        (
            'application/ld+json; profile="https://example.org/profile?v=1"',
            "https://example.org/profile?v=1",
        ),
        # only the quotes around the value are removed, never its own characters
        ('application/ld+json; profile="urn:x:X"', "urn:x:X"),
        ("application/ld+json; profile='urn:x:X'", "urn:x:X"),
    ],
)
def test_the_profile_parameter_of_the_script_type_is_read(
    script_type: str, profile: str | None
) -> None:
    block = _block_of(script_type)
    assert block is not None
    assert block.profile == profile


def test_broken_html_around_a_block_is_tolerated() -> None:
    # Given a page whose markup is broken (end tags that close nothing, an unclosed element)
    page = (
        b'<html><head><script type=\'application/ld+json\'>{"@type": "Dataset"}</script>'
        b"</head><body><p>one</b></td></tr></table></div><span>unclosed</body></html>"
    )
    # Then its block is still found, as the recovering parser reads it
    assert [block.text for block in find_jsonld_scripts(page)] == ['{"@type": "Dataset"}']


# --- bytes, empty texts and what a refusal says --------------------------------------------


@pytest.mark.parametrize(
    ("body", "repairs"),
    [
        # RFC 8259, 8.1: a parser may ignore a byte order mark; on bytes it is part of the
        # encoding, not a repair of the text
        (b'\xef\xbb\xbf{"name": "caf\xc3\xa9"}', ()),
        (b'{"name": "caf\xc3\xa9"}', ()),
        (b'{"name": "caf\xe9"}', ("decoded as Latin-1: not UTF-8 (byte 13)",)),
    ],
)
def test_how_bytes_are_decoded_is_recorded_only_when_they_are_not_utf8(
    body: bytes, repairs: tuple[str, ...]
) -> None:
    parsed = parse_jsonld(body)
    assert (parsed.data, parsed.repairs) == ({"name": "café"}, repairs)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " \n\t",
        b"",
        b"\xef\xbb\xbf",
        '{"a": 1 "b": 2}',
        '{"a": 1, // a note\n "b" 2,}',
    ],
)
def test_every_malformed_json_refusal_says_it_is_malformed_json_ld(text: str | bytes) -> None:
    with pytest.raises(ExtractionError) as refused:
        parse_jsonld(text)
    assert refused.value.reason == "malformed-json"
    assert str(refused.value).startswith("malformed JSON-LD")


@pytest.mark.parametrize(
    ("text", "tried"),
    [
        ('{"a": 1 "b": 2}', ()),
        ('{"a": 1, // a note\n "b" 2,}', ("removed comments", "removed trailing commas")),
        # an unterminated /* is kept, and the // comments after it are still removed
        ('{"a": 1 /* never closed\n// a note\n}', ("removed comments",)),
        # nothing removed, nothing claimed: every /* here is unterminated
        ('{"a": 1, /* first /* second\n}', ()),
    ],
)
def test_a_refusal_names_the_repairs_that_were_tried(text: str, tried: tuple[str, ...]) -> None:
    with pytest.raises(ExtractionError) as refused:
        parse_jsonld(text)
    message = str(refused.value)
    if tried:
        assert message.endswith(f" (after repairs: {', '.join(tried)})")
    else:
        assert "after repairs" not in message


@pytest.mark.parametrize("excess", [0, 1])
def test_a_text_as_long_as_the_repair_limit_is_still_repaired(
    monkeypatch: pytest.MonkeyPatch, excess: int
) -> None:
    text = '{"a": 1, "b": [2,],}'
    monkeypatch.setattr(extraction, "MAX_REPAIR_CHARS", len(text) - excess)
    if excess:
        with pytest.raises(ExtractionError, match="not repaired"):
            parse_jsonld(text)
    else:
        assert parse_jsonld(text).data == {"a": 1, "b": [2]}


# --- stray closers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "data"),
    [
        # a "]" that ends a top-level array early, the rest being more items
        (
            '[{"@type": "Dataset"}], {"@type": "Person"}]',
            [{"@type": "Dataset"}, {"@type": "Person"}],
        ),
        # a closer that ends the document early, the rest on the next line
        ('{"a": {"b": 1}}\n, "c": 2}', {"a": {"b": 1}, "c": 2}),
        ('{"a": {"b": 1}}  ,\n "c": 2}', {"a": {"b": 1}, "c": 2}),
        # closers that close nothing after a document whose inner closers come one at a time
        ('{"a": {"b": [1], "c": 2}}]', {"a": {"b": [1], "c": 2}}),
        ('{"a": {"b": [1], "c": {"d": [2]}}}}]', {"a": {"b": [1], "c": {"d": [2]}}}),
        ('[[1], [2], {"a": [3]}]}]', [[1], [2], {"a": [3]}]),
    ],
)
def test_stray_closers_are_removed(text: str, data: Any) -> None:
    parsed = parse_jsonld(text)
    assert (parsed.data, parsed.repairs) == (data, ("removed a stray closing brace or bracket",))


def test_at_most_two_closers_that_end_a_document_early_are_dropped() -> None:
    # Each dropped closer costs a parse of the whole text: two are repaired, a third is not.
    twice = '{"a": {"b": {"c": 1}}}, "d": 2}, "e": 3}'
    assert parse_jsonld(twice).data == {"a": {"b": {"c": 1}}, "d": 2, "e": 3}
    thrice = '{"a": {"b": {"c": {"x": 1}}}}, "d": 2}, "e": 3}, "f": 4}'
    with pytest.raises(ExtractionError, match="malformed JSON-LD"):
        parse_jsonld(thrice)


# --- where a Dataset is looked for --------------------------------------------------------


def _record_about(resource: Any) -> dict[str, Any]:
    return {"@type": "DigitalDocument", "about": resource}


_DATASET = {"@type": "Dataset"}


@pytest.mark.parametrize(
    "data",
    [
        # the about of a metadata record, under each name JSON-LD lets it have
        {"@type": "DigitalDocument", "about": _DATASET},
        {"@type": "DigitalDocument", "schema:about": _DATASET},
        {"@type": "DigitalDocument", "http://schema.org/about": _DATASET},
        {"@type": "DigitalDocument", "https://schema.org/about": _DATASET},
        # the elements of an ItemList, bare or in a ListItem's item
        {"@type": "ItemList", "itemListElement": [_record_about(_DATASET)]},
        {"@type": "ItemList", "schema:itemListElement": [_record_about(_DATASET)]},
        {"@type": "ItemList", "itemListElement": [{"@type": "ListItem", "item": _DATASET}]},
        {"@type": "ItemList", "itemListElement": [{"@type": "ListItem", "schema:item": _DATASET}]},
        # the deepest of those shapes: a @graph holding an ItemList of ListItems whose items are
        # metadata records about the Dataset
        {
            "@graph": [
                {
                    "@type": "ItemList",
                    "itemListElement": [
                        {"@type": "ListItem", "item": _record_about({"@type": "Person"})},
                        {"@type": "ListItem", "item": _record_about(_DATASET)},
                    ],
                }
            ]
        },
        # what else the document holds does not hide the Dataset: a record about a plain IRI,
        # a string, arrays nested deeper than any of the shapes above
        [_DATASET, _record_about("https://doi.org/10.1234/x")],
        [_DATASET, "a note"],
        [_DATASET, [[[[[[[["deep"]]]]]]]]],
        {"@graph": [_DATASET, {"about": {"about": {"about": {"about": {"about": {}}}}}}]},
    ],
)
def test_a_dataset_is_found_in_each_documented_shape(data: Any) -> None:
    assert has_dataset(data) is True
