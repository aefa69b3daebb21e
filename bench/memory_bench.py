"""Benchmark: the peak memory of a whole local harvest as the site grows (cost at scale).

Run from the repository root::

    .venv/bin/python bench/memory_bench.py --pages 1000 10000 50000
    .venv/bin/python bench/memory_bench.py --pages 1000 --small
    .venv/bin/python bench/memory_bench.py --pages 1000 --processes 2

For each size it writes the local benchmark's site (robots.txt, a sitemap index, two sitemaps,
N landing pages of about 40 KB from the extraction benchmark, each page written as it is made;
``--small``: the re-harvest benchmark's 12 KB pages) into a temporary folder, serves it on
127.0.0.1 with the product's demo server in a process of its own (which reads each page from
disk as it is asked for), and runs ``LocalHarvester`` on its robots.txt in a fresh interpreter
(``local_bench.py``'s harvest child). Reported per size: records, seconds, the peak RSS of the
harvesting process (``VmHWM``: its high-water mark over the whole run, the close included) and
that peak just before the run is closed (the crawl alone). Neither the site's writer nor its
server is in the harvesting process. With ``--processes N`` (documents read in N processes) the
peak adds the sum of theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extraction_bench import PUBLISHERS, SEED, build_page  # noqa: E402 - the bench folder
from local_bench import _run_child, serve_site  # noqa: E402
from reharvest_bench import write_site  # noqa: E402


def _write_pages(site: Path, pages: int) -> None:
    """The extraction benchmark's pages (as ``generate`` makes them), written one at a time."""
    rng = random.Random(SEED)
    for number in range(pages):
        _, html, _ = build_page(rng, PUBLISHERS[number % len(PUBLISHERS)], number)
        (site / "datasets" / f"{number:05d}.html").write_bytes(html)


def measure(pages: int, *, small: bool, processes: int = 1) -> dict[str, Any]:
    """Write and serve a site of ``pages`` pages, harvest it in a child; return its figures."""
    # (A harvest leaves hundreds of thousands of files: a failure to delete one of them must
    # not lose the figures.)
    with tempfile.TemporaryDirectory(
        prefix="cdif-memory-bench-", ignore_cleanup_errors=True
    ) as tmp:
        site, out = Path(tmp) / "site", Path(tmp) / "out"
        write_site(site, pages, lastmod=True)
        if not small:
            _write_pages(site, pages)
        with serve_site(site) as base:
            got = _run_child("--child-harvest", base, str(out), "--processes", str(processes))
            print(json.dumps(got), file=sys.stderr, flush=True)  # before the slow clean-up
            return got


def main() -> None:
    """Measure every size asked for and print the curve as a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument(
        "--small", action="store_true", help="the re-harvest benchmark's 12 KB pages instead"
    )
    parser.add_argument("--processes", type=int, default=1, help="document processes")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, processes {args.processes}")
    print("| pages | URLs | records | seconds | peak RSS before closing MiB | peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|")
    for pages in args.pages:
        got = measure(pages, small=args.small, processes=args.processes)
        print(
            f"| {pages} | {got['urls']} | {got['records']} | {float(got['seconds']):.0f} "
            f"| {float(got['crawl_peak_rss_mib']):.0f} | {float(got['peak_rss_mib']):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
