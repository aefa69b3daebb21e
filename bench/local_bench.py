"""Benchmark: the local harvest's speed, memory and disk against a plain httpx client (issue 20).

Run from the repository root::

    .venv/bin/python bench/local_bench.py --pages 1000
    .venv/bin/python bench/local_bench.py --pages 4000 --profile /tmp/harvest.prof
    .venv/bin/python bench/local_bench.py --pages 1000 --processes 1 2

It writes the re-harvest benchmark's site (``reharvest_bench.write_site``: robots.txt, a sitemap
index, two sitemaps with lastmod) with the extraction benchmark's N landing pages (about 40 KB,
one CDIF block of 2 to 10 KB, seven publishers' styles, nearly all valid; ``--small``: the
re-harvest benchmark's 12 KB pages) into a temporary folder and serves it on 127.0.0.1 with the
product's demo server in a process of its own (its memory and CPU are not counted). Then:

1. **harvest**: a fresh interpreter runs ``LocalHarvester`` (default settings, ``--processes``
   processes reading documents: by default 1, and one per core when that is more; each
   number a harvest of its own into an empty folder) on the site's robots.txt and reports
   wall seconds, CPU seconds (``getrusage``, every thread, its document processes included)
   and its peak RSS (``VmHWM`` of its own process image; with document processes, the sum of
   their own ``VmHWM`` read as the run ends is added);
2. **baseline**: a fresh interpreter fetches the same pages with one ``httpx.Client`` on as many
   threads as the harvester has workers (4), reading every body.

Reported: records/s, CPU ms per record, peak RSS, bytes written per record (every file under the
output folder), the ratio harvest rate / httpx rate and each rate over the first harvest's
(``vs first``). ``--profile FILE`` writes a cProfile of the harvest (which slows it; figures
from a profiled run are not the rates).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extraction_bench import generate  # noqa: E402 - the benchmark's own folder, on the path
from reharvest_bench import write_site  # noqa: E402

_SERVER = """
import sys
from cdif_harvester.demo.server import PublisherSite
site = PublisherSite(sys.argv[1]).start()
print(site.base_url, flush=True)
sys.stdin.read()
site.stop()
"""


@contextmanager
def serve_site(site: Path) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 with the demo server in a process of its own (its CPU and
    memory not counted); yield its base URL, stop it after."""
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(site)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=60)


def _peak_rss_mib(pid: int | None = None) -> float:
    with Path(f"/proc/{pid or 'self'}/status").open(encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds(who: int | None = None) -> float:
    import resource  # noqa: PLC0415 - Linux-only, in the child

    usage = resource.getrusage(resource.RUSAGE_SELF if who is None else who)
    return usage.ru_utime + usage.ru_stime


class _ThreadCpu:
    """The CPU time of each thread of this process, by thread name (numbered names counted
    together: ``cdif-fetch_0`` to ``_3`` as ``cdif-fetch``), read from ``/proc`` every 50 ms while
    the harvest runs: a pool's threads are gone by the time it returns."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-sampler", daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> _ThreadCpu:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._read()

    def _read(self) -> None:
        for thread in threading.enumerate():
            tid = thread.native_id
            if tid is None or thread is self._thread:
                continue
            try:
                with Path(f"/proc/self/task/{tid}/stat").open(encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # (it ended between the listing and the read)
            # utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name
            self._last[tid] = (thread.name, (int(fields[11]) + int(fields[12])) / self._tick)

    def by_name(self) -> dict[str, float]:
        """Seconds of CPU by thread name, numbers dropped."""
        totals: dict[str, float] = {}
        for name, seconds in self._last.values():
            key = name.rstrip("0123456789").rstrip("_-")
            totals[key] = totals.get(key, 0.0) + seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))


def _children_peak_rss_mib() -> float:
    """The largest peak RSS of the processes this one started and waited for."""
    import resource  # noqa: PLC0415

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _child_harvest(base: str, out: str, profile: str | None, processes: int = 1) -> None:
    from cdif_harvester.cli import runner  # noqa: PLC0415
    from cdif_harvester.cli.runner import LocalHarvester  # noqa: PLC0415

    # The peak before the run is closed (the crawl) apart from the peak of closing it (the
    # report over every outcome of the run).
    marks: dict[str, float] = {}
    close_run = runner.close_run

    def marked_close_run(*args: object, **kwargs: object) -> object:
        marks["crawl"] = _peak_rss_mib()
        marks["close_started"] = time.perf_counter()
        return close_run(*args, **kwargs)  # type: ignore[arg-type]

    runner.close_run = marked_close_run  # type: ignore[assignment]
    # The document processes' own peaks, read just before they are told to exit.
    from cdif_harvester.cli.processes import StagePool  # noqa: PLC0415

    pool_close = StagePool.close
    peaks: list[float] = []

    def measured_close(pool: StagePool) -> None:
        peaks.extend(_peak_rss_mib(pid) for pid in pool.pids())
        pool_close(pool)

    StagePool.close = measured_close  # type: ignore[method-assign]
    import resource  # noqa: PLC0415

    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    with (
        _ThreadCpu() as threads,
        LocalHarvester(Path(out), allow_loopback=True, processes=processes) as harvester,
    ):
        if profile:
            import cProfile  # noqa: PLC0415

            profiler = cProfile.Profile()
            summary = profiler.runcall(harvester.harvest, f"{base}/robots.txt")
            profiler.dump_stats(profile)
        else:
            summary = harvester.harvest(f"{base}/robots.txt")
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    marks["close_seconds"] = time.perf_counter() - marks.get("close_started", float("nan"))
    # (the document processes have exited and been waited for when harvest() returns)
    children_cpu = _cpu_seconds(resource.RUSAGE_CHILDREN)
    cpu += children_cpu
    children_peak = _children_peak_rss_mib() if processes > 1 else 0.0
    children_sum = sum(peaks)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "children_cpu": children_cpu,
                "threads_cpu": threads.by_name(),
                "close_seconds": marks.get("close_seconds", float("nan")),
                "records": summary.records,
                "valid": summary.valid_records,
                "urls": summary.urls,
                "outcomes": {k: v for k, v in summary.outcomes.items() if v},
                "peak_rss_mib": _peak_rss_mib() + children_sum,
                "own_peak_rss_mib": _peak_rss_mib(),
                "children_peak_rss_mib": children_peak,
                "children_peaks_mib": peaks,
                "crawl_peak_rss_mib": marks.get("crawl", float("nan")),
            }
        )
    )


def _child_httpx(base: str, pages: int, workers: int) -> None:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    import httpx  # noqa: PLC0415

    urls = [f"{base}/datasets/{i:05d}.html" for i in range(pages)]
    t0 = time.perf_counter()
    with httpx.Client() as client, ThreadPoolExecutor(workers) as pool:
        sizes = list(pool.map(lambda url: len(client.get(url).content), urls))
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "pages": len(sizes), "bytes": sum(sizes)}))


def _run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _tree_bytes(root: Path) -> tuple[int, int]:
    total = files = 0
    for folder, _, names in os.walk(root):
        for name in names:
            total += (Path(folder) / name).stat().st_size
            files += 1
    return total, files


def _bytes_by_folder(root: Path) -> dict[str, int]:
    """Bytes under each top-level folder of ``root`` (files at the top as ``.``)."""
    found: dict[str, int] = {}
    for folder, _, names in os.walk(root):
        parts = Path(folder).relative_to(root).parts
        top = parts[0] if parts else "."
        found[top] = found.get(top, 0) + sum((Path(folder) / n).stat().st_size for n in names)
    return found


def _default_processes() -> list[int]:
    from cdif_harvester.cli.processes import default_processes  # noqa: PLC0415

    return sorted({1, default_processes()})


def main() -> None:
    """Serve the site, run the harvests and the baseline, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--profile", help="write a cProfile of the harvest here")
    parser.add_argument(
        "--small", action="store_true", help="the re-harvest benchmark's 12 KB pages instead"
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the httpx baseline")
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        help="a harvest with each number of document processes (default: 1 and the cores)",
    )
    parser.add_argument("--child-harvest", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-httpx", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_harvest:
        _child_harvest(*args.child_harvest, args.profile, (args.processes or [1])[0])
        return
    if args.child_httpx:
        _child_httpx(args.child_httpx[0], int(args.child_httpx[1]), 4)
        return
    counts = args.processes or _default_processes()
    harvests: dict[int, dict[str, Any]] = {}
    disk: dict[int, tuple[int, int, dict[str, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="cdif-local-bench-") as tmp:
        site = Path(tmp) / "site"
        write_site(site, args.pages, lastmod=True)
        # The pages themselves: the extraction benchmark's corpus (valid CDIF records, so every
        # record gets its views), in place of the re-harvest benchmark's small pages.
        for index, page in enumerate([] if args.small else generate(args.pages)):
            (site / "datasets" / f"{index:05d}.html").write_bytes(page.html)
        with serve_site(site) as base:
            extra = ["--profile", args.profile] if args.profile else []
            for count in counts:
                out = Path(tmp) / f"out-{count}"
                harvests[count] = _run_child(
                    "--child-harvest", base, str(out), "--processes", str(count), *extra
                )
                written, files = _tree_bytes(out)
                disk[count] = (written, files, _bytes_by_folder(out))
            pages = str(args.pages)
            baseline = None if args.no_baseline else _run_child("--child-httpx", base, pages)
    httpx_rate = args.pages / float(baseline["seconds"]) if baseline else float("nan")
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {args.pages} pages")
    print(
        "| processes | pages | records | seconds | records/s | CPU ms/record | peak RSS MiB "
        "| crawl peak MiB | bytes/record | files | httpx pages/s | ratio | vs first |"
    )
    print("|" + " ---: |" * 13)
    _print_rows(args.pages, harvests, disk, httpx_rate)


def _print_rows(
    pages: int,
    harvests: dict[int, dict[str, Any]],
    disk: dict[int, tuple[int, int, dict[str, int]]],
    httpx_rate: float,
) -> None:
    first_rate = None
    for count, harvest in harvests.items():
        records = int(harvest["records"])
        rate = records / float(harvest["seconds"])
        first_rate = first_rate or rate
        cpu_ms = 1000 * float(harvest["cpu"]) / max(records, 1)
        written, files, _ = disk[count]
        print(
            f"| {count} | {pages} | {records} | {float(harvest['seconds']):.1f} "
            f"| {rate:.0f} | {cpu_ms:.2f} | {float(harvest['peak_rss_mib']):.0f} "
            f"| {float(harvest['crawl_peak_rss_mib']):.0f} "
            f"| {written / max(records, 1):,.0f} | {files} | {httpx_rate:.0f} "
            f"| {rate / httpx_rate:.2f} | {rate / first_rate:.2f} |"
        )
    for count, harvest in harvests.items():
        records = int(harvest["records"])
        print(
            f"processes {count}: outcomes {harvest['outcomes']}, valid {harvest['valid']}, "
            f"own peak RSS {float(harvest['own_peak_rss_mib']):.0f} MiB, largest document "
            f"process {float(harvest['children_peak_rss_mib']):.0f} MiB, CPU of the document "
            f"processes {float(harvest['children_cpu']):.1f} s, closing the run and its report "
            f"{float(harvest['close_seconds']):.1f} s"
        )
        threads = ", ".join(f"{name} {cpu:.1f} s" for name, cpu in harvest["threads_cpu"].items())
        print(f"  CPU of the harvesting process by thread: {threads}")
        folders = disk[count][2]
        per_folder = (
            f"{name} {size / max(records, 1):,.0f}" for name, size in sorted(folders.items())
        )
        print("  bytes/record by folder: " + ", ".join(per_folder))


if __name__ == "__main__":
    main()
