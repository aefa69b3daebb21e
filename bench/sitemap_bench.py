"""Benchmark: expanding a 50,000-URL sitemap, against ultimate-sitemap-parser (issue 3).

Run from the repository root::

    .venv/bin/python bench/sitemap_bench.py            # full run (about 2 minutes)
    .venv/bin/python bench/sitemap_bench.py --quick    # smoke run (fewer repetitions)

It generates four sitemaps deterministically into a temporary directory (50,000 ``<url>``
entries each; an 11 MB one with loc, lastmod, changefreq and priority, and a 50 MB one
(47.5 MiB, under the parser's default 50 MiB ``max_bytes``) whose entries also carry four Signmap
``<rs:ln>`` links and an image extension; each plain and gzip), then

* times, interleaved and repeated, our expansion (``iter_sitemap`` consumed as the sitemap
  expander consumes it: the first 5,000-entry part held, later parts dropped as they fill, as
  the expander writes them out) and ultimate-sitemap-parser (USP, which returns the list of all
  pages) on the same bytes, from bytes in memory (no network at all), and checks both found
  50,000 URLs;
* measures the peak memory each one adds, in a fresh subprocess per measurement (RSS high-water
  mark, counted from the moment the input bytes are loaded: the input itself is not counted, the
  returned entries are).

The report is printed as Markdown (the table pasted into ``bench/RESULTS.md``); ``--json``
also writes the raw figures to a file.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "layers" / "core"))

N_URLS = 50_000
SITEMAP_URL = "https://data.example.org/sitemaps/sitemap.xml"
MIB = 1024 * 1024
GOAL_RATIO = 3.0
GOAL_ADDED_MIB = 32.0

SM_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
RS_NS = "http://www.openarchives.org/rs/terms/"
IMAGE_NS = "http://www.google.com/schemas/sitemap-image/1.1"

_TOPICS = (
    "ocean-ctd-profiles", "sea-surface-temperature", "soil-moisture", "river-discharge",
    "atmospheric-co2", "glacier-mass-balance", "seismic-waveforms", "air-quality-pm25",
    "benthic-biodiversity", "lidar-canopy-height", "groundwater-levels", "coral-bleaching",
)  # fmt: skip
_FREQS = ("daily", "weekly", "monthly", "yearly")


# -- inputs ----------------------------------------------------------------------------------------


def _small_urlset(rng: random.Random) -> str:
    """About 200 bytes per entry: the common sitemap (loc, lastmod, changefreq, priority)."""
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SM_NS}">\n']
    for i in range(N_URLS):
        topic = rng.choice(_TOPICS)
        year = 2000 + i % 25
        stamp = (
            f"{year}-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}"
        )
        parts.append(
            "  <url>\n"
            f"    <loc>https://data.example.org/datasets/{topic}/{year}/station-{i:06d}.html</loc>\n"
            f"    <lastmod>{stamp}+00:00</lastmod>\n"
            f"    <changefreq>{rng.choice(_FREQS)}</changefreq>\n"
            f"    <priority>0.{rng.randint(1, 9)}</priority>\n"
            "  </url>\n"
        )
    parts.append("</urlset>\n")
    return "".join(parts)


def _big_urlset(rng: random.Random) -> str:
    """About 1,000 bytes per entry: a Signmap (four ``<rs:ln>`` typed links per URL: two
    ``describedby`` metadata documents with profiles, ``cite-as`` a DOI, ``item`` the data file)
    plus one ``<image:image>`` extension element, as catalogue sitemaps often carry."""
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<urlset xmlns="{SM_NS}"\n        xmlns:rs="{RS_NS}"\n'
        f'        xmlns:image="{IMAGE_NS}">\n'
    ]
    for i in range(N_URLS):
        topic = rng.choice(_TOPICS)
        year = 2000 + i % 25
        slug = f"{topic}/{year}/station-{i:06d}"
        stamp = (
            f"{year}-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}"
        )
        doi = f"10.5072/{topic[:4]}.{year}.{rng.randint(100000, 999999)}"
        parts.append(
            "  <url>\n"
            f"    <loc>https://data.example.org/datasets/{slug}.html</loc>\n"
            f"    <lastmod>{stamp}+00:00</lastmod>\n"
            f"    <changefreq>{rng.choice(_FREQS)}</changefreq>\n"
            f"    <priority>0.{rng.randint(1, 9)}</priority>\n"
            f'    <rs:ln rel="describedby" href="https://data.example.org/metadata/{slug}.jsonld"'
            ' type="application/ld+json"'
            ' profile="https://w3id.org/cdif/core/1.0/"/>\n'
            f'    <rs:ln rel="describedby" href="https://data.example.org/metadata/{slug}.xml"'
            ' type="application/xml"'
            ' profile="http://www.isotc211.org/2005/gmd"/>\n'
            f'    <rs:ln rel="cite-as" href="https://doi.org/{doi}"/>\n'
            f'    <rs:ln rel="item" href="https://data.example.org/files/{slug}.nc"'
            ' type="application/x-netcdf"/>\n'
            "    <image:image>\n"
            f"      <image:loc>https://data.example.org/previews/{slug}.png</image:loc>\n"
            f"      <image:title>{topic.replace('-', ' ')}, {year}</image:title>\n"
            "    </image:image>\n"
            "  </url>\n"
        )
    parts.append("</urlset>\n")
    return "".join(parts)


def generate(directory: Path) -> list[Path]:
    """Write the four inputs (deterministic: fixed seeds, gzip mtime 0); return their paths."""
    paths = []
    for name, build, seed in (("small", _small_urlset, 3), ("big", _big_urlset, 4)):
        xml = build(random.Random(seed)).encode("utf-8")
        plain = directory / f"sitemap-{name}.xml"
        plain.write_bytes(xml)
        packed = directory / f"sitemap-{name}.xml.gz"
        packed.write_bytes(gzip.compress(xml, compresslevel=6, mtime=0))
        paths += [plain, packed]
    return paths


# -- the two parsers -------------------------------------------------------------------------------


EXPANDER_PART = 5_000  # Settings.max_urls_per_job: the entries the expander holds per part


def ours(body: bytes, name: str) -> Any:
    """Our expansion: bytes (plain or gzip) to every entry, consumed as the sitemap expander
    consumes them. The entries come from ``iter_sitemap``; the first part (5,000 entries) is
    kept, as the expander keeps it until the document has been read whole, and each later part
    is dropped once full, as the expander writes it out then."""
    from cdif_harvester.domain.discovery.sitemap import iter_sitemap

    first: list[Any] = []
    part: list[Any] = []
    count = 0
    for entry in iter_sitemap(body, sitemap_url=SITEMAP_URL):
        count += 1
        if len(first) < EXPANDER_PART:
            first.append(entry)
            continue
        part.append(entry)
        if len(part) == EXPANDER_PART:
            part = []  # written out as a part by the expander
    return range(count)  # how many were found, without keeping them


def baseline(body: bytes, name: str) -> Any:
    """ultimate-sitemap-parser: bytes (plain or gzip) to all pages, through its own fetcher path
    (gunzip with its size cap, decoding, the expat parser, its on-disk page store) with a web
    client that hands it the bytes instead of making a request."""
    from usp.fetch_parse import SitemapFetcher
    from usp.web_client.abstract_client import (
        AbstractWebClient,
        AbstractWebClientResponse,
        AbstractWebClientSuccessResponse,
    )

    class Response(AbstractWebClientSuccessResponse):
        def __init__(self, url: str) -> None:
            self._url = url

        def status_code(self) -> int:
            return 200

        def status_message(self) -> str:
            return "OK"

        def header(self, case_insensitive_name: str) -> str | None:
            return None  # gzip is recognised by the ".gz" name, as USP does for real fetches

        def raw_data(self) -> bytes:
            return body

        def url(self) -> str:
            return self._url

    class InMemoryClient(AbstractWebClient):
        def set_max_response_data_length(self, max_response_data_length: int | None) -> None:
            pass

        def get(self, url: str) -> AbstractWebClientResponse:
            return Response(url)

    suffix = ".xml.gz" if name.endswith(".gz") else ".xml"
    url = SITEMAP_URL.removesuffix(".xml") + suffix
    sitemap = SitemapFetcher(url=url, recursion_level=0, web_client=InMemoryClient()).sitemap()
    return list(sitemap.all_pages())


PARSERS: dict[str, Callable[[bytes, str], Any]] = {"ours": ours, "usp": baseline}


def _quiet_usp() -> None:
    import logging

    logging.getLogger("usp").setLevel(logging.ERROR)


# -- time ------------------------------------------------------------------------------------------


def time_all(paths: list[Path], reps: int) -> dict[str, dict[str, list[float]]]:
    """Interleave: every repetition runs every file with both parsers, alternating which goes
    first. Returns seconds per file and parser."""
    bodies = {p.name: p.read_bytes() for p in paths}
    times: dict[str, dict[str, list[float]]] = {n: {"ours": [], "usp": []} for n in bodies}
    for name, body in bodies.items():  # warm-up (imports, caches) and the correctness check
        for label, parse in PARSERS.items():
            found = len(parse(body, name))
            if found != N_URLS:
                raise SystemExit(f"{label} found {found} URLs in {name}, expected {N_URLS}")
    for rep in range(reps):
        for name, body in bodies.items():
            order = ("ours", "usp") if rep % 2 == 0 else ("usp", "ours")
            for label in order:
                gc.collect()
                started = time.perf_counter()
                result = PARSERS[label](body, name)
                elapsed = time.perf_counter() - started
                del result
                times[name][label].append(elapsed)
        print(f"  repetition {rep + 1}/{reps} done", file=sys.stderr)
    return times


# -- memory ----------------------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    """Reset the RSS high-water mark (Linux >= 4.0); False when the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def memory_child(label: str, path: str) -> None:
    """In a fresh interpreter: load the input, then measure what one parse adds to RSS."""
    _quiet_usp()
    name = Path(path).name
    body = Path(path).read_bytes()
    parse = PARSERS[label]
    # Warm up on a one-URL sitemap so that imports and one-off set-up are not counted.
    parse(f'<urlset xmlns="{SM_NS}"><url><loc>{SITEMAP_URL}</loc></url></urlset>'.encode(), "w.xml")

    gc.collect()
    reset = _reset_peak()
    rss_before = _status_kib("VmRSS")
    hwm_before = _status_kib("VmHWM")
    result = parse(body, name)
    hwm_after = _status_kib("VmHWM")
    rss_after = _status_kib("VmRSS")
    # Without a reset the high-water mark may predate the parse; the baseline is then the
    # larger of the two readings taken before it.
    base = rss_before if reset else max(rss_before, hwm_before)
    print(
        json.dumps(
            {
                "found": len(result),
                "peak_added_mib": (hwm_after - base) / 1024,
                "retained_mib": (rss_after - rss_before) / 1024,
                "hwm_reset": reset,
                "input_mib": len(body) / MIB,
            }
        )
    )


def measure_memory(paths: list[Path]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for path in paths:
        out[path.name] = {}
        for label in PARSERS:
            proc = subprocess.run(
                [sys.executable, __file__, "--memory-child", label, str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(proc.stdout.strip().splitlines()[-1])
            if figures["found"] != N_URLS:
                raise SystemExit(f"{label} found {figures['found']} URLs in {path.name}")
            out[path.name][label] = figures
    return out


# -- report ----------------------------------------------------------------------------------------


def report(
    paths: list[Path],
    times: dict[str, dict[str, list[float]]],
    memory: dict[str, dict[str, dict[str, Any]]],
    reps: int,
) -> tuple[str, dict[str, Any]]:
    rows = []
    lines = [
        "| file | size | ours (s) | USP (s) | USP / ours "
        "| ours peak added (MiB) | ours retained (MiB) | ours peak - retained (MiB) "
        "| USP peak added (MiB) | USP retained (MiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ok = True
    for path in paths:
        name = path.name
        t_ours = statistics.median(times[name]["ours"])
        t_usp = statistics.median(times[name]["usp"])
        ratio = t_usp / t_ours
        m_ours = memory[name]["ours"]
        m_usp = memory[name]["usp"]
        ok = ok and ratio >= GOAL_RATIO and m_ours["peak_added_mib"] < GOAL_ADDED_MIB
        size = path.stat().st_size
        transient = m_ours["peak_added_mib"] - m_ours["retained_mib"]
        rows.append(
            {
                "file": name,
                "bytes": size,
                "ours_s": times[name]["ours"],
                "usp_s": times[name]["usp"],
                "ours_median_s": t_ours,
                "usp_median_s": t_usp,
                "ratio": ratio,
                "memory": memory[name],
            }
        )
        lines.append(
            f"| `{name}` | {size / 1e6:.1f} MB | {t_ours:.3f} | {t_usp:.3f} | {ratio:.1f}x "
            f"| {m_ours['peak_added_mib']:.1f} | {m_ours['retained_mib']:.1f} | {transient:.1f} "
            f"| {m_usp['peak_added_mib']:.1f} | {m_usp['retained_mib']:.1f} |"
        )
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "repetitions": reps,
        "goals_met": ok,
    }
    head = (
        f"{meta['date']}, Python {meta['python']}, {meta['nproc']} CPUs, {meta['platform']}, "
        f"median of {reps} interleaved repetitions\n\n"
    )
    verdict = (
        f"\nGoals (ratio >= {GOAL_RATIO:.0f}x and ours peak added < {GOAL_ADDED_MIB:.0f} MiB "
        f"on every file): {'met' if ok else 'NOT met'}\n"
    )
    return head + "\n".join(lines) + "\n" + verdict, {"meta": meta, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 repetitions instead of 7")
    parser.add_argument("--reps", type=int, help="repetitions (overrides --quick)")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    parser.add_argument(
        "--memory-child", nargs=2, metavar=("PARSER", "FILE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return
    _quiet_usp()
    reps = args.reps or (2 if args.quick else 7)
    with tempfile.TemporaryDirectory(prefix="sitemap-bench-") as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        paths = generate(directory)
        for p in paths:
            print(f"  {p.name}: {p.stat().st_size:,} bytes", file=sys.stderr)
        times = time_all(paths, reps)
        memory = measure_memory(paths)
        text, raw = report(paths, times, memory, reps)
        print(text)
        print(f"(whole run: {time.perf_counter() - started:.0f} s)", file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(raw, indent=2) + "\n")


if __name__ == "__main__":
    main()
