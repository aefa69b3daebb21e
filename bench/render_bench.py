"""Pages per second and peak memory of the local renderer (headless Chromium over its pipe).

Serves N pages on 127.0.0.1 whose JSON-LD is inserted by a script after an XHR, renders them
one after another with :class:`~cdif_harvester.adapters.render.ChromiumRenderer` and reports
the rate and the peak resident memory of the browser's process tree (sampled every 50 ms).

    python bench/render_bench.py [PAGES]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from cdif_harvester.adapters.http import FetchPolicy, SafeFetcher
from cdif_harvester.adapters.render import ChromiumRenderer
from cdif_harvester.demo.server import PublisherSite

PAGE = """<html><head><script>
const x = new XMLHttpRequest(); x.open('GET', '/meta.json');
x.onload = () => { const s = document.createElement('script'); s.type = 'application/ld+json';
  s.textContent = x.responseText; document.head.appendChild(s); }; x.send();
</script></head><body><p>A landing page</p></body></html>"""


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, parent = int(entry.name), int(fields.get("PPid", "0").strip())
        children.setdefault(parent, []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def main() -> None:
    """Render the pages and print the figures as JSON."""
    pages = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    data = json.dumps({"@context": "https://schema.org/", "@type": "Dataset", "name": "bench"})
    peak = 0
    with tempfile.TemporaryDirectory() as root, PublisherSite(root) as site:
        for n in range(pages):
            site.add_route(f"/p{n}", headers={"content-type": "text/html"}, body=PAGE)
        site.add_route("/meta.json", headers={"content-type": "application/json"}, body=data)
        with SafeFetcher(FetchPolicy(allow_loopback=True)) as fetcher:
            renderer = ChromiumRenderer(fetcher, allow_loopback=True)
            renderer.render(site.url("/p0"))  # start-up, not counted
            browser = renderer._browser  # noqa: SLF001 - the bench samples its process tree
            assert browser is not None
            done = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not done.is_set():
                    peak = max(peak, _tree_rss(browser.pid))
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            found = sum(
                b"ld+json" in renderer.render(site.url(f"/p{n}")).html for n in range(pages)
            )
            elapsed = time.monotonic() - started
            done.set()
            sampler.join()
            renderer.close()
    print(
        json.dumps(
            {
                "pages": pages,
                "with_json_ld": found,
                "seconds": round(elapsed, 2),
                "pages_per_second": round(pages / elapsed, 2),
                "peak_rss_mib": round(peak / 2**20, 1),
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
