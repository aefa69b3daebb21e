"""Benchmark: the whole sitemap expander on a 50,000-URL Signmap, against ultimate-sitemap-parser.

Run from the repository root (after ``.venv/bin/pip install -e '.[bench]'``)::

    .venv/bin/python bench/expander_bench.py            # 5 repetitions, about a minute
    .venv/bin/python bench/expander_bench.py --reps 2   # smoke run
    .venv/bin/python bench/expander_bench.py --cpu      # CPU time instead of wall-clock time

``sitemap_bench.py`` times the parse alone. This one times what an expander invocation does with
the same 50 MB Signmap (plain and gzip): ``expand_sitemap`` with the local adapters (a temporary
folder as object store, SQLite as catalogue, the in-process queue) and a fetcher of our own port
that answers the bytes from memory, so it covers the parse, the run bookkeeping, the 5,000 URL
jobs of the first part (encoded messages) and the nine stored parts of the rest. The baseline is
ultimate-sitemap-parser parsing the same bytes (as in ``sitemap_bench.py``), in the same run,
interleaved; reported are medians and the ratio USP / ours. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sitemap_bench import SITEMAP_URL, _quiet_usp, baseline, generate  # noqa: E402

from cdif_harvester.adapters.local import (  # noqa: E402
    DirectoryObjectStore,
    InProcessQueue,
    SqliteCatalog,
    SystemClock,
)
from cdif_harvester.contracts import URL_QUEUE, SitemapJob  # noqa: E402
from cdif_harvester.model import FetchResponse  # noqa: E402
from cdif_harvester.stages.expand import ExpansionResult, expand_sitemap  # noqa: E402
from cdif_harvester.stages.runs import begin_run  # noqa: E402
from cdif_harvester.wiring import Wiring  # noqa: E402


class MemoryFetcher:
    """Our Fetcher port answering one sitemap from memory; robots.txt is absent (404)."""

    def __init__(self, url: str, body: bytes) -> None:
        self.url, self.body = url, body

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        if url == self.url:
            return FetchResponse(url, 200, (("content-type", "application/xml"),), self.body)
        return FetchResponse(url, 404, (), b"")


def expander(body: bytes, name: str, work: Path, *, count: bool = False) -> int:
    """One expander invocation on ``body``; with ``count``, returns the URLs it handed on as
    jobs or wrote in parts (counted after the work, outside what is timed)."""
    url = SITEMAP_URL.removesuffix(".xml") + (".xml.gz" if name.endswith(".gz") else ".xml")
    folder = Path(tempfile.mkdtemp(dir=work))
    catalog = SqliteCatalog(folder / "catalog.sqlite")
    queue = InProcessQueue()
    wiring = Wiring(
        store=DirectoryObjectStore(folder / "store"),
        catalog=catalog,
        queue=queue,
        fetcher=MemoryFetcher(url, body),
        clock=SystemClock(),
    )
    begin_run(wiring, "bench", [url])
    result = expand_sitemap(wiring, SitemapJob(run_id="bench", source="bench", url=url, depth=1))
    catalog.close()
    if not isinstance(result, ExpansionResult):
        raise SystemExit(f"the expander failed on {name}: {result.reason}")
    if not count:
        return 0
    sent = 0
    while queue.receive(URL_QUEUE) is not None:
        sent += 1
    parts = (folder / "store").rglob("*.json")
    return sent + sum(len(json.loads(part.read_bytes())["entries"]) for part in parts)


def main() -> None:
    """Generate the Signmaps, time both, print the Markdown table for RESULTS.md."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--reps", type=int, default=5)
    args.add_argument(
        "--cpu", action="store_true", help="time the process's CPU (steadier on a busy machine)"
    )
    options = args.parse_args()
    clock = time.process_time if options.cpu else time.perf_counter
    _quiet_usp()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = [p for p in generate(work) if "big" in p.name]
        bodies = {p.name: p.read_bytes() for p in paths}
        times: dict[str, dict[str, list[float]]] = {n: {"ours": [], "usp": []} for n in bodies}
        for name, body in bodies.items():  # warm-up and correctness check
            handed = expander(body, name, work, count=True)
            if handed != 50_000:
                raise SystemExit(f"the expander handed on {handed} URLs of {name}, not 50,000")
            baseline(body, name)
        for rep in range(options.reps):
            for name, body in bodies.items():
                order = ("ours", "usp") if rep % 2 == 0 else ("usp", "ours")
                for label in order:
                    gc.collect()
                    started = clock()
                    if label == "ours":
                        expander(body, name, work)
                    else:
                        baseline(body, name)
                    times[name][label].append(clock() - started)
            print(f"  repetition {rep + 1}/{options.reps} done", file=sys.stderr)
    timed = "CPU time" if options.cpu else "wall-clock time"
    version = f"Python {platform.python_version()} on {platform.machine()}"
    print(f"{version}; {options.reps} reps, {timed}.\n")
    print("| file | expander (s) | USP parse (s) | USP / expander |")
    print("| --- | ---: | ---: | ---: |")
    for name, by in times.items():
        ours, usp = statistics.median(by["ours"]), statistics.median(by["usp"])
        print(f"| `{name}` | {ours:.3f} | {usp:.3f} | {usp / ours:.1f}x |")


if __name__ == "__main__":
    main()
