"""Benchmark: CPU per record for extract + normalise + validate, against extruct + pyld (issue 5).

Run from the repository root::

    .venv/bin/python bench/extraction_bench.py            # full run (about 2 minutes)
    .venv/bin/python bench/extraction_bench.py --quick    # smoke run (fewer repetitions)

It generates a corpus of landing pages deterministically (fixed seed; 400 pages of about
40 KB of HTML: a realistic head, navigation, text, tables and a few script blocks of other
kinds, and one CDIF JSON-LD block of 2 to 10 KB; seven publishers, each with its own page
template and JSON-LD style, one of them writing CDIF 1.1 records claiming core and discovery),
then times, interleaved and repeated, per page:

* **ours**: what the extractor does with a landing page (``stages/extract.py``), through the
  product's public functions: ``find_jsonld_scripts`` (blocks with a CDIF profile first),
  ``parse_jsonld`` (with its repairs), ``has_dataset``, ``normalise`` (the fast JSON-LD path of
  ``domain/records/jsonld_fast.py``, pyld where it declines, with the shipped offline contexts and
  the process-wide caches, warmed by one page before timing, as a Lambda container is after its
  first record) and ``validate_record(...).to_dict()``;
* **baseline**: ``extruct.extract(html, syntaxes=["json-ld"])``, then for every item it returns
  a plain ``pyld.jsonld.expand`` and ``jsonld.compact`` (with the CDIF compaction context) with a
  document loader that serves the same context documents from memory without any caching: it
  parses the context JSON on every call and tags nothing for pyld to keep;
* **baseline, cold** (for reference, not a goal): the same with pyld's own process-wide caches
  (resolved and inverse contexts) empty for each page, i.e. no context caching at all.

The measure is CPU time (``time.process_time_ns``) per page; each page's figure is the median
of its repetitions, and the report gives p50, p90, p99 and mean over the pages, the ratios
baseline / ours, and the goals (p50 <= 3 ms, p99 <= 15 ms, at least 5x faster). Nothing
touches the network. The report is printed as Markdown (pasted into ``bench/RESULTS.md``);
``--json`` also writes the raw figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "layers" / "core"))

SEED = 5
N_PAGES = 400
HTML_BYTES = (36_000, 44_000)  # each page's total size is drawn from this range
JSONLD_BYTES = (2_000, 9_500)  # the CDIF block grows to a size drawn from this range
GOAL_P50_MS = 3.0
GOAL_P99_MS = 15.0
GOAL_RATIO = 5.0
CDIF_PROFILE = "https://w3id.org/cdif/core/1.0"
CDIF_11_CORE = "https://w3id.org/cdif/core/1.1"
CDIF_11_DISCOVERY = "https://w3id.org/cdif/discovery/1.1"


# -- inputs: words and names -----------------------------------------------------------------------

_WORDS = (
    "ocean", "temperature", "salinity", "profile", "station", "transect", "mooring", "sensor",
    "calibration", "quality", "controlled", "daily", "monthly", "gridded", "anomaly", "sediment",
    "core", "isotope", "glacier", "mass", "balance", "soil", "moisture", "river", "discharge",
    "gauge", "precipitation", "aerosol", "optical", "depth", "satellite", "retrieval", "in situ",
    "observations", "campaign", "cruise", "vessel", "instrument", "resolution", "vertical",
    "horizontal", "interpolated", "processed", "raw", "level", "archive", "dataset", "survey",
    "seasonal", "variability", "trend", "climatology", "reanalysis", "model", "output",
    "uncertainty", "estimate", "baseline", "coastal", "shelf", "basin", "catchment", "permafrost",
    "snow", "ice", "thickness", "chlorophyll", "nutrient", "oxygen", "carbon", "flux", "methane",
    "biodiversity", "species", "abundance", "transects", "diver", "canopy", "cover", "benthic",
    "the", "of", "and", "in", "from", "with", "at", "for", "over", "along", "per", "each",
    "measurements", "were", "collected", "using", "between", "during", "are", "provided", "as",
)  # fmt: skip
_GIVEN = (
    "Jean-Pierre", "Wei", "Amara", "Sofía", "Lars", "Keiko", "Olumide", "Priya", "Mateus",
    "Ingrid", "Tomás", "Hana", "Rafael", "Zainab", "Mikko", "Chloé", "Dmitri", "Aisha",
)  # fmt: skip
_FAMILY = (
    "Marchand", "Li", "Okafor", "García", "Andersen", "Tanaka", "Adeyemi", "Raman", "Souza",
    "Lindqvist", "Ferreira", "Novak", "Moreau", "Haddad", "Virtanen", "Dubois", "Volkov", "Kaur",
)  # fmt: skip
_ORGS = (
    ("Institut Océanographique", "https://ror.org/04t3en479"),
    ("Nordic Polar Institute", "https://ror.org/01x8hew03"),
    ("University of Coastal Sciences", "https://ror.org/02abc1234"),
    ("Alpine Earth Observatory", "https://ror.org/03def5678"),
    ("National Hydrology Service", "https://ror.org/05ghi9012"),
    ("Atmospheric Research Council", "https://ror.org/06jkl3456"),
)
_FORMATS = (
    ("application/x-netcdf", "nc", "NetCDF-4 (CF-1.8)"),
    ("text/csv", "csv", "CSV, one row per observation"),
    ("application/zip", "zip", "Zipped archive of the raw files"),
    ("application/json", "json", "GeoJSON features"),
    ("image/tiff", "tif", "Cloud-optimised GeoTIFF"),
)
_VARIABLES = (
    ("sea_water_temperature", "degree Celsius", "TEMPPR01"),
    ("sea_water_practical_salinity", "1", "PSALST01"),
    ("sea_water_pressure", "dbar", "PRESPR01"),
    ("mass_concentration_of_chlorophyll_a", "mg m-3", "CPHLPR01"),
    ("soil_moisture_content", "kg m-2", "SMCONT01"),
    ("river_discharge", "m3 s-1", "RVDISC01"),
    ("aerosol_optical_thickness", "1", "AOTXXX01"),
    ("surface_snow_thickness", "m", "SNTHCK01"),
    ("mole_fraction_of_methane_in_air", "nmol mol-1", "MTHNAR01"),
)
_LICENSES = (
    "https://creativecommons.org/licenses/by/4.0/",
    "https://creativecommons.org/publicdomain/zero/1.0/",
    "https://opendatacommons.org/licenses/odbl/1-0/",
)


def _sentence(rng: random.Random, low: int = 8, high: int = 22) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


# -- inputs: the JSON-LD record --------------------------------------------------------------------


@dataclass(frozen=True)
class Publisher:
    """One site: its name, base URL, JSON-LD style and page template quirks."""

    name: str
    base: str
    style: str  # cdif | schemaorg | graph | about | cdif-min | schemaorg-nosl | cdif-11
    indent: int | None
    profile: str | None  # the script element's profile attribute
    sitewide_block: bool  # a WebSite/Organization JSON-LD block as well
    nav_links: int


PUBLISHERS = (
    Publisher("Tidewater Ocean Data Archive", "https://toda.example.org", "cdif", 2, "CDIF1.0",
              True, 60),
    Publisher("Alpine Geoscience Repository", "https://agr.example.net", "schemaorg", None, None,
              True, 90),
    Publisher("Polar Data Centre", "https://pdc.example.ac.uk", "graph", 2, CDIF_PROFILE,
              False, 45),
    Publisher("Soil Observatory Network", "https://son.example.eu", "about", 1, None,
              False, 70),
    Publisher("Atmospheric Composition Portal", "https://acp.example.gov", "cdif-min", None,
              CDIF_PROFILE, False, 110),
    Publisher("River Gauging Service", "https://rgs.example.org", "schemaorg-nosl", 4, None,
              True, 50),
    Publisher("Coastal Sensor Network", "https://csn.example.org", "cdif-11", 2, CDIF_11_CORE,
              False, 65),
)  # fmt: skip


def _person(rng: random.Random, n: int) -> dict[str, Any]:
    given, family = rng.choice(_GIVEN), rng.choice(_FAMILY)
    orcid = f"0000-000{rng.randint(1, 3)}-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"
    org, ror = rng.choice(_ORGS)
    person: dict[str, Any] = {
        "@id": f"https://orcid.org/{orcid}",
        "@type": "Person",
        "name": f"{family}, {given}",
        "givenName": given,
        "familyName": family,
        "affiliation": {"@id": ror, "@type": "Organization", "name": org},
        "identifier": {
            "@type": "PropertyValue",
            "propertyID": "https://registry.identifiers.org/registry/orcid",
            "value": orcid,
            "url": f"https://orcid.org/{orcid}",
        },
    }
    if n % 3 == 0:
        person["contactPoint"] = {
            "@type": "ContactPoint",
            "email": f"{family.lower()}.{n}@example.org",
        }
    return person


def _distribution(rng: random.Random, base: str, slug: str, n: int) -> dict[str, Any]:
    media, ext, label = rng.choice(_FORMATS)
    item: dict[str, Any] = {
        "@type": "DataDownload",
        "name": f"{label}, part {n + 1}",
        "description": _sentence(rng, 10, 25),
        "contentUrl": f"{base}/files/{slug}/part-{n + 1:03d}.{ext}",
        "encodingFormat": [media],
        "contentSize": f"{rng.randint(1, 900)} MB",
    }
    if n % 2 == 0:
        item["spdx:checksum"] = {
            "@type": "spdx:Checksum",
            "spdx:algorithm": "checksumAlgorithm_sha256",
            "spdx:checksumValue": f"{rng.getrandbits(256):064x}",
        }
    return item


def _variable(rng: random.Random) -> dict[str, Any]:
    name, unit, code = rng.choice(_VARIABLES)
    return {
        "@type": "PropertyValue",
        "name": name,
        "description": _sentence(rng, 6, 14),
        "unitText": unit,
        "propertyID": f"https://vocab.nerc.ac.uk/collection/P01/current/{code}/",
        "minValue": round(rng.uniform(-5, 5), 3),
        "maxValue": round(rng.uniform(10, 40), 3),
    }


def _keyword(rng: random.Random, n: int) -> Any:
    word = rng.choice(_WORDS[:80])
    if n % 2:
        return word
    return {
        "@type": "DefinedTerm",
        "name": word,
        "inDefinedTermSet": "https://gcmd.earthdata.nasa.gov/kms/concepts/concept_scheme/"
        "sciencekeywords",
        "termCode": f"EARTH SCIENCE > {word.upper()}",
    }


def _polygon(rng: random.Random, points: int) -> str:
    lon, lat = rng.uniform(-170, 160), rng.uniform(-70, 60)
    coords = [f"{lat + rng.uniform(0, 8):.4f} {lon + rng.uniform(0, 8):.4f}" for _ in range(points)]
    return " ".join([*coords, coords[0]])


def _record(rng: random.Random, pub: Publisher, slug: str, target: int) -> dict[str, Any]:
    """A schema.org description of one dataset (unprefixed keys), grown to about ``target``
    bytes once rendered in the publisher's style."""
    doi = f"https://doi.org/10.5072/{pub.base.split('//')[1].split('.')[0]}.{slug}"
    record_id = f"{pub.base}/metadata/{slug}"
    org, ror = rng.choice(_ORGS)
    year = rng.randint(1995, 2018)
    dataset: dict[str, Any] = {
        "@id": doi,
        "@type": "Dataset",
        "name": _sentence(rng, 5, 12)[:-1],
        "description": _paragraph(rng, rng.randint(1, 3)),
        "identifier": {
            "@type": "PropertyValue",
            "propertyID": "https://registry.identifiers.org/registry/doi",
            "value": doi.removeprefix("https://doi.org/"),
            "url": doi,
        },
        "url": f"{pub.base}/datasets/{slug}.html",
        "dateModified": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "datePublished": f"{year + 1}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "license": [rng.choice(_LICENSES)],
        "conditionsOfAccess": ["Open access; please cite the dataset DOI."],
        "version": f"{rng.randint(1, 4)}.{rng.randint(0, 9)}",
        "inLanguage": "en",
        "keywords": [],
        "creator": [],
        "publisher": {"@id": ror, "@type": "Organization", "name": org},
        "provider": [{"@id": ror, "@type": "Organization", "name": org}],
        "distribution": [],
        "variableMeasured": [],
        "temporalCoverage": f"{year}-01-01/{year + rng.randint(1, 6)}-12-31",
        "spatialCoverage": {
            "@type": "Place",
            "name": _sentence(rng, 2, 4)[:-1],
            "geo": {"@type": "GeoShape", "polygon": _polygon(rng, 5)},
        },
        "funding": [],
    }
    if rng.random() < 0.05:
        del dataset["dateModified"]  # a few records miss a required item: invalid, reported
    metadata_record = {
        "@id": record_id,
        "@type": "Dataset",
        "additionalType": ["dcat:CatalogRecord"],
        "about": {"@id": doi},
        "dcterms:conformsTo": [{"@id": CDIF_PROFILE}],
        "sdDatePublished": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "maintainer": {"@id": ror, "@type": "Organization", "name": org},
    }
    if target < 3_200:  # a short record: no optional extras
        for key in ("spatialCoverage", "conditionsOfAccess", "version", "publisher"):
            del dataset[key]
        del metadata_record["maintainer"]
    growers: tuple[Callable[[int], None], ...] = (
        lambda n: dataset["creator"].append(_person(rng, n)),
        lambda n: dataset["keywords"].append(_keyword(rng, n)),
        lambda n: dataset["keywords"].append(_keyword(rng, n + 1)),
        lambda n: dataset["distribution"].append(_distribution(rng, pub.base, slug, n)),
        lambda n: dataset["variableMeasured"].append(_variable(rng)),
        lambda n: dataset["funding"].append(
            {
                "@type": "MonetaryGrant",
                "name": _sentence(rng, 3, 8)[:-1],
                "identifier": {
                    "@type": "PropertyValue",
                    "propertyID": "https://example.org/grant-registry",
                    "value": f"GRANT-{rng.randint(1000, 99999)}",
                },
                "funder": {"@type": "Organization", "name": rng.choice(_ORGS)[0]},
            }
        ),
        lambda n: (
            dataset["spatialCoverage"]["geo"].update(
                polygon=dataset["spatialCoverage"]["geo"]["polygon"] + " " + _polygon(rng, 4)
            )
            if "spatialCoverage" in dataset
            else dataset["keywords"].append(_keyword(rng, n))
        ),
    )
    n = 0
    for grow in growers[:2]:  # at least one creator and one keyword
        grow(n)
    while len(render_jsonld(dataset, metadata_record, pub)) < target:
        growers[n % len(growers)](n)
        n += 1
    return {"dataset": dataset, "record": metadata_record}


def _prefixed(value: Any) -> Any:
    """The CDIF JSON shape: ``schema:`` on every unprefixed key and type, ``@type`` arrays."""
    if isinstance(value, list):
        return [_prefixed(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, child in value.items():
        if key == "@type":
            types = child if isinstance(child, list) else [child]
            out[key] = [t if ":" in t else f"schema:{t}" for t in types]
        elif key.startswith("@") or ":" in key:
            out[key] = _prefixed(child)
        else:
            out[f"schema:{key}"] = _prefixed(child)
    return out


_CDIF_CONTEXT = {
    "schema": "http://schema.org/",
    "dcterms": "http://purl.org/dc/terms/",
    "dcat": "http://www.w3.org/ns/dcat#",
    "prov": "http://www.w3.org/ns/prov#",
    "spdx": "http://spdx.org/rdf/terms#",
}


_CDIF_11_CONTEXT = {
    **_CDIF_CONTEXT,
    "cdi": "http://ddialliance.org/Specification/DDI-CDI/1.0/RDF/",
    "geosparql": "http://www.opengis.net/ont/geosparql#",
    "sf": "http://www.opengis.net/ont/sf#",
}


def _wkt_polygon(polygon: str) -> str:
    """A schema.org GeoShape polygon ("lat lon lat lon ...") as WKT ("POLYGON((lon lat, ...))")."""
    numbers = polygon.split()
    pairs = [f"{lon} {lat}" for lat, lon in zip(numbers[::2], numbers[1::2], strict=True)]
    return f"POLYGON(({', '.join(pairs)}))"


def _as_cdif_11(body: dict[str, Any]) -> dict[str, Any]:
    """A CDIF 1.0-shaped body (prefixed keys) as a CDIF 1.1 record claiming core and discovery:
    the catalogue record type as an IRI reference, variables typed cdi:InstanceVariable, the
    geometry as a GeoSPARQL WKT literal. Returns new dicts where it changes anything."""
    out = dict(body)
    out["schema:subjectOf"] = {
        **body["schema:subjectOf"],
        "schema:additionalType": [{"@id": "dcat:CatalogRecord"}],
        "dcterms:conformsTo": [{"@id": CDIF_11_CORE}, {"@id": CDIF_11_DISCOVERY}],
    }
    if "schema:variableMeasured" in body:
        out["schema:variableMeasured"] = [
            {**variable, "@type": [*variable["@type"], "cdi:InstanceVariable"]}
            for variable in body["schema:variableMeasured"]
        ]
    place = body.get("schema:spatialCoverage")
    if place is not None:
        shape = place["schema:geo"]
        out["schema:spatialCoverage"] = [
            {
                "@type": place["@type"],
                "schema:name": place["schema:name"],
                "geosparql:hasGeometry": {
                    "@type": ["sf:Polygon"],
                    "geosparql:asWKT": {
                        "@type": "geosparql:wktLiteral",
                        "@value": _wkt_polygon(shape["schema:polygon"]),
                    },
                },
            }
        ]
    return out


def render_jsonld(dataset: dict[str, Any], record: dict[str, Any], pub: Publisher) -> str:
    """The dataset and its metadata record as the publisher writes them in its page."""
    doc: Any
    dataset = {key: value for key, value in dataset.items() if value != []}
    if pub.style in ("cdif", "cdif-min"):
        body = {**dataset, "subjectOf": record}
        body = _prefixed(body)
        if "schema:creator" in body:  # CDIF: creators in the order given
            body["schema:creator"] = {"@list": body["schema:creator"]}
        doc = {"@context": _CDIF_CONTEXT, **body}
    elif pub.style == "cdif-11":  # a CDIF 1.1 record (core and discovery)
        body = _as_cdif_11(_prefixed({**dataset, "subjectOf": record}))
        if "schema:creator" in body:
            body["schema:creator"] = {"@list": body["schema:creator"]}
        doc = {"@context": _CDIF_11_CONTEXT, **body}
    elif pub.style in ("schemaorg", "schemaorg-nosl"):
        context = "https://schema.org/" if pub.style == "schemaorg" else "https://schema.org"
        doc = {"@context": context, **dataset, "subjectOf": record}
    elif pub.style == "graph":
        context = ["https://schema.org/", {k: v for k, v in _CDIF_CONTEXT.items() if k != "schema"}]
        doc = {
            "@context": context,
            "@graph": [
                {**dataset, "subjectOf": {"@id": record["@id"]}},
                record,
            ],
        }
    else:  # "about": the older shape, the metadata record at the root (https vocabulary)
        context = {"@vocab": "https://schema.org/", **_CDIF_CONTEXT}
        doc = {"@context": context, **record, "about": dataset}
    separators = (",", ":") if pub.indent is None else None
    return json.dumps(doc, indent=pub.indent, ensure_ascii=False, separators=separators)


# -- inputs: the page ------------------------------------------------------------------------------

_CSS = (
    ":root{--ink:#1b1f24;--accent:#0b5cad;--muted:#5b6470}"
    "body{font-family:system-ui,sans-serif;color:var(--ink);margin:0;line-height:1.5}"
    "header,footer{background:#f3f5f7;padding:1rem 2rem}nav ul{list-style:none;display:flex;"
    "flex-wrap:wrap;gap:.75rem;margin:0;padding:0}main{max-width:60rem;margin:2rem auto;"
    "padding:0 1rem}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid "
    "#dde1e6;padding:.3rem .5rem;text-align:left}.card{border:1px solid #dde1e6;border-radius:"
    "6px;padding:1rem;margin:.5rem 0}.muted{color:var(--muted)}.cite{background:#f9fafb;"
    "padding:1rem;font-family:ui-monospace,monospace}@media (max-width:40rem){nav ul{display:"
    "block}main{margin:1rem}}"
)
_ANALYTICS = (
    "window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}"
    "gtag('js',new Date());gtag('config','G-XXXXXXX',{anonymize_ip:true});"
    "(function(w,d,s){var f=d.getElementsByTagName(s)[0],j=d.createElement(s);j.async=true;"
    "j.src='/static/js/analytics.min.js?v=20250301';f.parentNode.insertBefore(j,f);})"
    "(window,document,'script');"
    "document.addEventListener('DOMContentLoaded',function(){var b=document.querySelectorAll("
    "'[data-copy]');for(var i=0;i<b.length;i++){b[i].addEventListener('click',function(e){"
    "navigator.clipboard.writeText(e.target.getAttribute('data-copy'));});}});"
)


def _nav(rng: random.Random, pub: Publisher) -> str:
    groups = []
    per_group = max(1, pub.nav_links // 6)
    for g in range(6):
        title = rng.choice(_WORDS[:80]).capitalize()
        items = "".join(
            f'<li><a href="{pub.base}/browse/{g}/{i}" class="nav-link">'
            f"{rng.choice(_WORDS[:80]).capitalize()} {rng.choice(_WORDS[:80])}</a></li>"
            for i in range(per_group)
        )
        groups.append(f'<li class="menu"><span>{title}</span><ul>{items}</ul></li>\n')
    return f'<nav aria-label="Main"><ul>\n{"".join(groups)}</ul></nav>\n'


def _sitewide_block(pub: Publisher) -> str:
    doc = {
        "@context": "https://schema.org",
        "@graph": [
            {
                "@type": "WebSite",
                "@id": f"{pub.base}/#website",
                "name": pub.name,
                "url": f"{pub.base}/",
                "potentialAction": {
                    "@type": "SearchAction",
                    "target": f"{pub.base}/search?q={{search_term_string}}",
                    "query-input": "required name=search_term_string",
                },
            },
            {"@type": "Organization", "@id": f"{pub.base}/#org", "name": pub.name},
        ],
    }
    return f'<script type="application/ld+json">\n{json.dumps(doc, indent=2)}\n</script>\n'


def build_page(rng: random.Random, pub: Publisher, number: int) -> tuple[str, bytes, int]:
    """One landing page: its URL, its bytes (UTF-8) and the size of its CDIF block."""
    slug = f"{rng.choice(_WORDS[:80]).replace(' ', '-')}-{number:04d}"
    url = f"{pub.base}/datasets/{slug}.html"
    jsonld_target = rng.randint(*JSONLD_BYTES)
    parts = _record(rng, pub, slug, jsonld_target)
    jsonld_text = render_jsonld(parts["dataset"], parts["record"], pub)
    dataset = parts["dataset"]
    profile = f' profile="{pub.profile}"' if pub.profile else ""
    config = json.dumps(
        {"site": pub.name, "base": pub.base, "locale": "en", "features": {"search": True}}
    )
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{dataset['name']} | {pub.name}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="description" content="{dataset["description"][:150]}">\n'
        f'<meta property="og:title" content="{dataset["name"]}">\n'
        '<meta property="og:type" content="website">\n'
        f'<meta property="og:url" content="{url}">\n'
        f'<link rel="canonical" href="{url}">\n'
        f'<link rel="cite-as" href="{dataset["@id"]}">\n'
        f'<link rel="describedby" href="{pub.base}/metadata/{slug}.jsonld" '
        'type="application/ld+json">\n'
        '<link rel="stylesheet" href="/static/css/site.css?v=3">\n'
        '<link rel="preload" href="/static/fonts/inter.woff2" as="font" crossorigin>\n'
        f"<script>{_ANALYTICS}</script>\n"
        f'<script type="application/json" id="site-config">{config}</script>\n'
        + (_sitewide_block(pub) if pub.sitewide_block else "")
        + f'<script type="application/ld+json"{profile}>\n{jsonld_text}\n</script>\n'
        f"<style>{_CSS}</style>\n</head>\n"
    )
    variables = "".join(
        f"<tr><td>{v['name']}</td><td>{v['unitText']}</td><td>{v['description']}</td></tr>\n"
        for v in dataset["variableMeasured"]
    )
    files = "".join(
        f'<tr><td><a href="{d["contentUrl"]}">{d["name"]}</a></td>'
        f"<td>{d['encodingFormat'][0]}</td><td>{d['contentSize']}</td></tr>\n"
        for d in dataset["distribution"]
    )
    creators = "; ".join(c["name"] for c in dataset["creator"])
    body = (
        '<body>\n<header><a class="logo" href="/">' + pub.name + "</a>\n" + _nav(rng, pub)
        + "</header>\n"
        f'<nav class="breadcrumb"><a href="/">Home</a> &rsaquo; <a href="/datasets/">Datasets'
        f"</a> &rsaquo; {dataset['name']}</nav>\n<main>\n<h1>{dataset['name']}</h1>\n"
        f'<p class="muted">{creators}</p>\n<p>{dataset["description"]}</p>\n'
        "<dl>\n"
        f"<dt>DOI</dt><dd>{dataset['@id']}</dd>\n"
        f'<dt>Licence</dt><dd><a href="{dataset["license"][0]}">{dataset["license"][0]}</a></dd>\n'
        f"<dt>Temporal coverage</dt><dd>{dataset['temporalCoverage']}</dd>\n"
        "</dl>\n"
        f"<h2>Variables</h2>\n<table>\n<tr><th>Name</th><th>Unit</th><th>About</th></tr>\n"
        f"{variables}</table>\n"
        f"<h2>Files</h2>\n<table>\n<tr><th>File</th><th>Format</th><th>Size</th></tr>\n"
        f"{files}</table>\n"
        f'<h2>Cite</h2>\n<div class="cite" data-copy="{dataset["@id"]}">{creators} '
        f"({dataset['datePublished'][:4]}). {dataset['name']}. {pub.name}. {dataset['@id']}</div>\n"
    )  # fmt: skip
    tail = (
        "</main>\n<footer>\n"
        + "".join(
            f'<a href="{pub.base}/about/{i}">{rng.choice(_WORDS[:80]).capitalize()}</a> | '
            for i in range(20)
        )
        + f"\n<address>{pub.name}, 1 Harbour Road, Port Town &middot; data@example.org</address>\n"
        '</footer>\n<script src="/static/js/site.min.js?v=3" defer></script>\n'
        "<script>document.documentElement.classList.add('js');</script>\n</body>\n</html>\n"
    )
    target = rng.randint(*HTML_BYTES)
    sections: list[str] = []
    size = len((head + body + tail).encode("utf-8"))
    section = 0
    while size < target:  # methods, processing notes and related datasets, to the page's size
        if section % 3 == 2:
            text = (
                f'<div class="card"><h3><a href="{pub.base}/datasets/related-{section}.html">'
                f"{_sentence(rng, 4, 9)[:-1]}</a></h3><p>{_sentence(rng)}</p></div>\n"
            )
        else:
            text = f"<h2>{_sentence(rng, 2, 4)[:-1]}</h2>\n<p>{_paragraph(rng, 4)}</p>\n"
        sections.append(text)
        size += len(text.encode("utf-8"))
        section += 1
    page = head + body + "".join(sections) + tail
    return url, page.encode("utf-8"), len(jsonld_text.encode("utf-8"))


@dataclass(frozen=True)
class Page:
    """One generated landing page."""

    url: str
    html: bytes
    jsonld_bytes: int
    publisher: str


_CDIF_11_PUBLISHERS = frozenset(pub.name for pub in PUBLISHERS if pub.style == "cdif-11")


def generate(pages: int) -> list[Page]:
    """The corpus: ``pages`` landing pages, publishers taking turns (deterministic)."""
    rng = random.Random(SEED)
    out = []
    for number in range(pages):
        pub = PUBLISHERS[number % len(PUBLISHERS)]
        url, html, jsonld_bytes = build_page(rng, pub, number)
        out.append(Page(url, html, jsonld_bytes, pub.name))
    return out


# -- the two pipelines -----------------------------------------------------------------------------


def ours(page: Page) -> list[dict[str, Any]]:
    """What the extractor does with one landing page (``stages/extract.py``), through the
    product's public functions: find the blocks (CDIF profile first), parse with repairs, skip
    blocks without a Dataset, normalise, validate. Returns one report per record."""
    from cdif_harvester.domain.records.extraction import (
        ExtractionError,
        find_jsonld_scripts,
        has_dataset,
        parse_jsonld,
    )
    from cdif_harvester.domain.records.normalisation import NormalisationError, normalise
    from cdif_harvester.domain.records.validation import validate_record
    from cdif_harvester.domain.resolution.rules import is_cdif_profile

    blocks = sorted(
        find_jsonld_scripts(page.html), key=lambda block: not is_cdif_profile(block.profile)
    )
    reports: list[dict[str, Any]] = []
    for block in blocks:
        try:
            parsed = parse_jsonld(block.text)
        except ExtractionError:
            continue
        if not has_dataset(parsed.data):
            continue
        try:
            records = normalise(parsed.data, document_url=page.url)
        except NormalisationError:
            continue
        reports.extend(
            {"record_id": item.record_id, **validate_record(item.record).to_dict()}
            for item in records
        )
    return reports


def _context_texts() -> dict[str, str]:
    """The context documents as JSON text (what a server would send), by URL."""
    from cdif_harvester.domain.records import jsonld_loader

    folder = resources.files("cdif_harvester").joinpath("contexts")
    schema_org = folder.joinpath("schemaorg.jsonld").read_text(encoding="utf-8")
    texts = dict.fromkeys(jsonld_loader.SCHEMA_ORG_CONTEXT_URLS, schema_org)
    texts[jsonld_loader.CDIF_CONTEXT_URL] = folder.joinpath("cdif.jsonld").read_text(
        encoding="utf-8"
    )
    texts[jsonld_loader.CDIF_11_CONTEXT_URL] = folder.joinpath("cdif-1.1.jsonld").read_text(
        encoding="utf-8"
    )
    return texts


_CONTEXT_TEXTS: dict[str, str] = {}


def plain_loader(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """A plain pyld document loader: the same contexts from memory, parsed on every call, no
    cache and no tag (so pyld keeps nothing under the URL); anything else is refused."""
    from pyld import jsonld

    text = _CONTEXT_TEXTS.get(url.strip())
    if text is None:
        raise jsonld.JsonLdError(
            f"{url} not served", "jsonld.LoadDocumentError", code="loading document failed"
        )
    return {
        "contentType": "application/ld+json",
        "contextUrl": None,
        "documentUrl": url,
        "document": json.loads(text),
    }


def baseline(page: Page) -> list[Any]:
    """extruct's JSON-LD extraction, then a plain pyld expand and compact of every item."""
    import extruct
    from pyld import jsonld

    from cdif_harvester.domain.records.jsonld_loader import CDIF_11_CONTEXT_URL, CDIF_CONTEXT_URL

    # the CDIF 1.1 publisher's records are compacted with the 1.1 context, as ours are
    context = CDIF_11_CONTEXT_URL if page.publisher in _CDIF_11_PUBLISHERS else CDIF_CONTEXT_URL
    items = extruct.extract(page.html, syntaxes=["json-ld"])["json-ld"]
    options = {"documentLoader": plain_loader, "base": page.url}
    out = []
    for item in items:
        expanded = jsonld.expand(item, options)
        out.append(jsonld.compact(expanded, context, {"documentLoader": plain_loader}))
    return out


def baseline_cold(page: Page) -> list[Any]:
    """The baseline with pyld's own process-wide caches (resolved contexts, inverse contexts)
    empty for this page: what no context caching at all costs. The caches are swapped, not
    cleared, so the other pipelines keep theirs."""
    from cachetools import LRUCache
    from pyld import jsonld

    saved = jsonld._resolved_context_cache, jsonld._inverse_context_cache
    jsonld._resolved_context_cache = LRUCache(maxsize=jsonld.RESOLVED_CONTEXT_CACHE_MAX_SIZE)
    jsonld._inverse_context_cache = LRUCache(maxsize=jsonld.INVERSE_CONTEXT_CACHE_MAX_SIZE)
    try:
        return baseline(page)
    finally:
        jsonld._resolved_context_cache, jsonld._inverse_context_cache = saved


PIPELINES: dict[str, Callable[[Page], Any]] = {
    "ours": ours,
    "baseline": baseline,
    "baseline-cold": baseline_cold,
}
LABELS = {
    "ours": "ours",
    "baseline": "extruct + pyld, uncached loader (the baseline)",
    "baseline-cold": "the same, pyld's own caches empty too",
}


def check(pages: list[Page]) -> dict[str, int]:
    """Run both once on every page: ours must find exactly one record per page, the baseline at
    least one item with a Dataset; returns how many of our records were valid, and how many
    times ours called pyld's expand and compact (the fast JSON-LD path declined)."""
    from pyld import jsonld

    calls = {"pyld_expand": 0, "pyld_compact": 0}
    real = {"pyld_expand": jsonld.expand, "pyld_compact": jsonld.compact}

    def counting(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real[name](*args, **kwargs)

        return call

    valid = invalid = 0
    for page in pages:
        jsonld.expand, jsonld.compact = counting("pyld_expand"), counting("pyld_compact")
        try:
            reports = ours(page)
        finally:
            jsonld.expand, jsonld.compact = real["pyld_expand"], real["pyld_compact"]
        if len(reports) != 1:
            raise SystemExit(f"ours found {len(reports)} records in {page.url}, expected 1")
        if reports[0]["valid"]:
            valid += 1
        else:
            invalid += 1
        items = baseline(page)
        if not any("Dataset" in json.dumps(item) for item in items):
            raise SystemExit(f"the baseline found no Dataset in {page.url}")
    return {"valid": valid, "invalid": invalid, **calls}


# -- time ------------------------------------------------------------------------------------------


def time_all(pages: list[Page], reps: int) -> dict[str, list[list[int]]]:
    """Every repetition runs every page with every pipeline, taking turns to go first. Returns
    CPU nanoseconds per pipeline, page and repetition."""
    times: dict[str, list[list[int]]] = {label: [[] for _ in pages] for label in PIPELINES}
    clock = time.process_time_ns
    labels = list(PIPELINES)
    for rep in range(reps):
        for number, page in enumerate(pages):
            shift = (rep + number) % len(labels)
            for label in labels[shift:] + labels[:shift]:
                run = PIPELINES[label]
                started = clock()
                run(page)
                times[label][number].append(clock() - started)
        print(f"  repetition {rep + 1}/{reps} done", file=sys.stderr)
    return times


def time_steps(pages: list[Page]) -> dict[str, float]:
    """Where our time goes: median CPU ms per page of each step (one pass, not interleaved)."""
    from cdif_harvester.domain.records.extraction import (
        find_jsonld_scripts,
        has_dataset,
        parse_jsonld,
    )
    from cdif_harvester.domain.records.normalisation import normalise
    from cdif_harvester.domain.records.validation import validate_record

    clock = time.process_time_ns
    steps: dict[str, list[int]] = {"find": [], "parse": [], "normalise": [], "validate": []}
    for page in pages:
        t0 = clock()
        blocks = find_jsonld_scripts(page.html)
        t1 = clock()
        parsed = [parse_jsonld(block.text) for block in blocks]
        datasets = [p.data for p in parsed if has_dataset(p.data)]
        t2 = clock()
        records = [r for data in datasets for r in normalise(data, document_url=page.url)]
        t3 = clock()
        for record in records:
            validate_record(record.record).to_dict()
        t4 = clock()
        for name, value in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            steps[name].append(value)
    return {name: statistics.median(values) / 1e6 for name, values in steps.items()}


# -- report ----------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the closest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(values_ms: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values_ms, 50),
        "p90": percentile(values_ms, 90),
        "p99": percentile(values_ms, 99),
        "mean": statistics.fmean(values_ms),
        "max": max(values_ms),
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def report(
    pages: list[Page],
    times: dict[str, list[list[int]]],
    steps: dict[str, float],
    validity: dict[str, int],
    reps: int,
) -> tuple[str, dict[str, Any]]:
    import lxml.etree

    per_page = {
        label: [statistics.median(samples) / 1e6 for samples in per] for label, per in times.items()
    }
    pooled = {
        label: [sample / 1e6 for samples in per for sample in samples]
        for label, per in times.items()
    }
    stats = {label: summarise(values) for label, values in per_page.items()}
    pooled_stats = {label: summarise(values) for label, values in pooled.items()}
    ours_s, base_s = stats["ours"], stats["baseline"]
    ratio_p50 = base_s["p50"] / ours_s["p50"]
    ratio_mean = base_s["mean"] / ours_s["mean"]
    goals = {
        f"p50 <= {GOAL_P50_MS:g} ms": ours_s["p50"] <= GOAL_P50_MS,
        f"p99 <= {GOAL_P99_MS:g} ms": ours_s["p99"] <= GOAL_P99_MS,
        f"baseline / ours p50 >= {GOAL_RATIO:g}x": ratio_p50 >= GOAL_RATIO,
        f"baseline / ours mean >= {GOAL_RATIO:g}x": ratio_mean >= GOAL_RATIO,
    }
    html_kb = [len(p.html) / 1000 for p in pages]
    jsonld_kb = [p.jsonld_bytes / 1000 for p in pages]
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "pyld": _version("PyLD"),
        "lxml": _version("lxml"),
        "libxml2": ".".join(map(str, lxml.etree.LIBXML_VERSION)),
        "extruct": _version("extruct"),
        "jsonschema": _version("jsonschema"),
        "jsonschema_rs": _version("jsonschema-rs"),
        "pages": len(pages),
        "repetitions": reps,
        "seed": SEED,
        "html_kb": {"min": min(html_kb), "median": statistics.median(html_kb), "max": max(html_kb)},
        "jsonld_kb": {
            "min": min(jsonld_kb),
            "median": statistics.median(jsonld_kb),
            "max": max(jsonld_kb),
        },
        "records": validity,
    }
    lines = [
        f"{meta['date']}, Python {meta['python']}, {meta['nproc']} CPUs, {meta['platform']}, "
        f"pyld {meta['pyld']}, lxml {meta['lxml']} (libxml2 {meta['libxml2']}), "
        f"extruct {meta['extruct']}, jsonschema {meta['jsonschema']}, "
        f"jsonschema-rs {meta['jsonschema_rs']}",
        "",
        f"{len(pages)} pages (seed {SEED}): HTML {meta['html_kb']['min']:.1f} to "
        f"{meta['html_kb']['max']:.1f} KB (median {meta['html_kb']['median']:.1f}), CDIF block "
        f"{meta['jsonld_kb']['min']:.1f} to {meta['jsonld_kb']['max']:.1f} KB (median "
        f"{meta['jsonld_kb']['median']:.1f}); {validity['valid']} records valid, "
        f"{validity['invalid']} invalid; ours called pyld's expand {validity['pyld_expand']} "
        f"and compact {validity['pyld_compact']} times (the fast JSON-LD path declined). "
        f"CPU ms per page, median of {reps} interleaved repetitions per page, then over the "
        "pages:",
        "",
        "| pipeline | p50 | p90 | p99 | mean | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, name in LABELS.items():
        s = stats[label]
        lines.append(
            f"| {name} | {s['p50']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | {s['mean']:.2f} "
            f"| {s['max']:.2f} |"
        )
    for label in ("baseline", "baseline-cold"):
        s = stats[label]
        lines.append(
            f"| {label} / ours | {s['p50'] / ours_s['p50']:.2f}x "
            f"| {s['p90'] / ours_s['p90']:.2f}x | {s['p99'] / ours_s['p99']:.2f}x "
            f"| {s['mean'] / ours_s['mean']:.2f}x | |"
        )
    lines += [
        "",
        f"Every sample pooled ({len(pages) * reps} per pipeline, no median per page first):",
        "",
        "| pipeline | p50 | p90 | p99 | mean | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label in PIPELINES:
        s = pooled_stats[label]
        lines.append(
            f"| {label} | {s['p50']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | {s['mean']:.2f} "
            f"| {s['max']:.2f} |"
        )
    lines += [
        "",
        "By size of the CDIF block (median CPU ms per page):",
        "",
        "| CDIF block | pages | ours | baseline | baseline / ours |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    size_bin = [min(max(page.jsonld_bytes // 2000, 1), 4) for page in pages]  # 2-KB steps
    for step in range(1, 5):
        low, high = 2 * step, 2 * step + 2
        chosen = [i for i, found in enumerate(size_bin) if found == step]
        if not chosen:
            continue
        o = statistics.median(per_page["ours"][i] for i in chosen)
        b = statistics.median(per_page["baseline"][i] for i in chosen)
        lines.append(f"| {low} to {high} KB | {len(chosen)} | {o:.2f} | {b:.2f} | {b / o:.2f}x |")
    lines += [
        "",
        "Ours by step (median CPU ms per page, one pass): "
        + ", ".join(f"{name} {value:.2f}" for name, value in steps.items()),
        "",
        "Goals: "
        + "; ".join(f"{goal}: {'met' if ok else 'NOT met'}" for goal, ok in goals.items()),
    ]
    raw = {
        "meta": meta,
        "per_page_ms": stats,
        "pooled_ms": pooled_stats,
        "ratio_p50": ratio_p50,
        "ratio_mean": ratio_mean,
        "steps_median_ms": steps,
        "goals": goals,
        "samples_ns": times,
        "pages": [
            {"url": p.url, "html_bytes": len(p.html), "jsonld_bytes": p.jsonld_bytes} for p in pages
        ],
    }
    return "\n".join(lines) + "\n", raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 repetitions instead of 5")
    parser.add_argument("--reps", type=int, help="repetitions (overrides --quick)")
    parser.add_argument("--pages", type=int, default=N_PAGES, help="pages in the corpus")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--keep", type=Path, help="write the generated pages here")
    args = parser.parse_args()
    reps = args.reps or (2 if args.quick else 5)
    started = time.perf_counter()
    pages = generate(args.pages)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for number, page in enumerate(pages):
            (args.keep / f"page-{number:04d}.html").write_bytes(page.html)
    print(
        f"  {len(pages)} pages generated ({sum(len(p.html) for p in pages) / 1e6:.1f} MB) in "
        f"{time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    _CONTEXT_TEXTS.update(_context_texts())
    # Warm-up with one page: imports, the schema validator, pyld's context cache (as a
    # container is after its first record). The results are checked after the timing, so
    # that nothing else warms anything before it.
    for run in PIPELINES.values():
        run(pages[0])
    gc.collect()
    times = time_all(pages, reps)
    validity = check(pages)
    steps = time_steps(pages)
    text, raw = report(pages, times, steps, validity, reps)
    print(text)
    print(f"(whole run: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(raw, indent=2) + "\n")


if __name__ == "__main__":
    main()
