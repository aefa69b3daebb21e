"""Benchmark: the CPU the fetch stack spends per page, against a plain httpx client (issue 20).

Run from the repository root::

    .venv/bin/python bench/fetch_bench.py --pages 3000 --repeat 5 --threads 1
    .venv/bin/python bench/fetch_bench.py --pages 3000 --repeat 5
    .venv/bin/python bench/fetch_bench.py --pages 2000 --repeat 3 --threads 1 --medium
    .venv/bin/python bench/fetch_bench.py --pages 1000 --profile fetch.prof

It writes N landing pages (the re-harvest benchmark's small pages, about 8 KiB; ``--medium``:
the extraction benchmark's 40 KB ones) and serves them on 127.0.0.1 with the product's demo
server in a process of its own (its CPU is not counted). Then a fresh interpreter per fetcher
fetches every page on ``--threads`` threads (4, the harvester's workers; 1: the measuring thread
itself), reading every body, and measures its own CPU seconds (``time.process_time``: every
thread) and wall seconds, after a warm-up of 50 pages:

1. **httpx**: one plain ``httpx.Client``;
2. **SafeFetcher**: the safe fetcher alone (``allow_loopback``);
3. **local stack**: the fetcher a local harvest uses, built by ``local_runtime.wiring`` (the host
   gate over the HTTP cache over the safe fetcher).

Both product fetchers are asked as the resolver asks for a page (``Accept`` of a page,
``Cache-Control: no-store``, the document cap).

Reported per fetcher: CPU ms per page (the least of ``--repeat`` runs), pages/s, and the CPU
ratio to plain httpx in the same run. ``--profile FILE`` writes a cProfile of the local stack's
run, fetched on one thread (figures from a profiled run are not the rates).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_bench import serve_site  # noqa: E402 - the benchmark's own folder, on the path
from reharvest_bench import write_site  # noqa: E402

KINDS = ("httpx", "safe", "stack")
_NAMES = {"httpx": "httpx.Client", "safe": "SafeFetcher", "stack": "local stack"}
_WARM_UP = 50


def _fetch_all(fetch: Any, urls: list[str], threads: int) -> int:
    """Fetch every URL on ``threads`` threads (1: this one); the total body bytes read."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    if threads == 1:
        return sum(map(fetch, urls))
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(fetch, urls))


def _child(kind: str, base: str, pages: int, threads: int, profile: str | None) -> None:
    import httpx  # noqa: PLC0415

    from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher  # noqa: PLC0415
    from cdif_harvester.local_runtime import LocalConfig, wiring  # noqa: PLC0415
    from cdif_harvester.settings import Settings  # noqa: PLC0415
    from cdif_harvester.stages.resolve import ACCEPT_PAGE, NO_STORE  # noqa: PLC0415

    urls = [f"{base}/datasets/{i:05d}.html" for i in range(pages)]
    warm = urls[:_WARM_UP]
    with tempfile.TemporaryDirectory(prefix="cdif-fetch-bench-") as tmp:
        if kind == "httpx":
            client = httpx.Client()
            closer = client.close

            def fetch(url: str) -> int:
                response = client.get(url)
                if response.status_code != 200:
                    raise RuntimeError(f"{url}: {response.status_code}")
                return len(response.content)

        else:
            # Both asked as the resolver asks for a page, so what differs is the layers.
            headers = {"Accept": ACCEPT_PAGE, **NO_STORE}
            cap = Settings().max_document_bytes
            if kind == "safe":
                safe = SafeFetcher(FetchPolicy(allow_loopback=True))
                fetcher: Any = safe
                closer = safe.close
            else:
                local = wiring(Path(tmp) / "out", LocalConfig(allow_loopback=True))
                fetcher = local.wiring.fetcher
                closer = local.close

            def fetch(url: str) -> int:
                response = fetcher.fetch(url, headers=headers, max_bytes=cap)
                if response.status != 200:
                    raise RuntimeError(f"{url}: {response.status}")
                return len(response.body)

        try:
            _fetch_all(fetch, warm, threads)
            cpu0, t0 = time.process_time(), time.perf_counter()
            if profile:
                import cProfile  # noqa: PLC0415

                profiler = cProfile.Profile()
                # cProfile sees one thread only: the profiled run fetches on this one.
                size = profiler.runcall(_fetch_all, fetch, urls, 1)
                profiler.dump_stats(profile)
            else:
                size = _fetch_all(fetch, urls, threads)
            cpu, seconds = time.process_time() - cpu0, time.perf_counter() - t0
        finally:
            closer()
    print(json.dumps({"cpu": cpu, "seconds": seconds, "pages": len(urls), "bytes": size}))


def _run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Serve the pages, fetch them with each fetcher, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=4, help="fetching threads (4)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per fetcher; the least CPU")
    parser.add_argument(
        "--medium", action="store_true", help="the extraction benchmark's 40 KB pages"
    )
    parser.add_argument("--profile", help="write a cProfile of the local stack's run here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, base = args.child
        _child(kind, base, args.pages, args.threads, args.profile)
        return
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="cdif-fetch-bench-") as tmp:
        site = Path(tmp) / "site"
        write_site(site, args.pages, lastmod=True)
        if args.medium:
            from extraction_bench import generate  # noqa: PLC0415

            for index, page in enumerate(generate(args.pages)):
                (site / "datasets" / f"{index:05d}.html").write_bytes(page.html)
        with serve_site(site) as base:
            common = ["--pages", str(args.pages), "--threads", str(args.threads)]
            for _ in range(max(1, args.repeat)):
                for kind in KINDS:
                    extra = ["--profile", args.profile] if args.profile and kind == "stack" else []
                    runs[kind].append(_run_child("--child", kind, base, *common, *extra))
    best = {kind: min(found, key=lambda run: float(run["cpu"])) for kind, found in runs.items()}
    size = int(best["httpx"]["bytes"]) / args.pages
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, {args.pages} pages of "
        f"{size / 1024:.0f} KiB, {args.threads} threads, least CPU of {max(1, args.repeat)} run(s)"
    )
    print("| fetcher | CPU ms/page | pages/s | CPU ratio to httpx |")
    print("| --- | ---: | ---: | ---: |")
    plain = float(best["httpx"]["cpu"])
    for kind in KINDS:
        run = best[kind]
        cpu = float(run["cpu"])
        print(
            f"| {_NAMES[kind]} | {1000 * cpu / args.pages:.3f} "
            f"| {args.pages / float(run['seconds']):.0f} | {cpu / plain:.2f} |"
        )


if __name__ == "__main__":
    main()
