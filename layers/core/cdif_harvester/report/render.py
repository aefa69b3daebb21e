"""How the publisher report looks: a :class:`~cdif_harvester.report.model.Report` as one HTML page.

The page is a complete, self-contained HTML5 document (inline CSS, an inline SVG chart, no script,
no external resource) laid out by the Jinja2 templates in ``templates/`` (``page.html.j2``, its
macros and its stylesheet), rendered with autoescaping on and control characters dropped. Each
number is the whole text of an element with ``data-count="<name>"``, so a program can read the
page back. Jinja2 is imported on the first page rendered only. Entry points: :func:`render_html`
(a Report) and :func:`render_report` (what a run wrote).

See docs/decisions/0045-the-publisher-report-page.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdif_harvester.report.model import HeldRecord, Report, build_report, printable

if TYPE_CHECKING:
    import jinja2

__all__ = ["render_html", "render_report"]

_MAX_TEXT = 400  # characters of one reason or message shown (the rest is in outcomes.jsonl)
_TEMPLATE = "page.html.j2"
_WEB_URL_RE = re.compile(r"(?i)https?://")

_OUTCOME_COLOURS: Mapping[str, str] = {
    "record": "#2e7d32",
    "no-metadata": "#b26a00",
    "unchanged": "#546e7a",
    "disallowed": "#6a1b9a",
    "blocked": "#8e2424",
    "failed": "#c62828",
}
_OTHER_COLOUR = "#57606a"

# The chart's geometry, in SVG user units: labels end at _LABEL_END, bars start at _BAR_START
# and the longest is _BAR_LENGTH long; each outcome takes a row _ROW high.
_LABEL_END = 104
_BAR_START = 112
_BAR_LENGTH = 330
_ROW = 30


@dataclass(frozen=True)
class _Bar:
    """One bar of the outcome chart, placed."""

    outcome: str
    urls: int
    colour: str
    middle: int  # the vertical middle of its row
    width: float
    label_x: float  # where the number after the bar starts


@dataclass(frozen=True)
class _Chart:
    """The outcome chart: its height and bars."""

    height: int
    label_end: int
    bar_start: int
    bars: tuple[_Bar, ...]


def _colour(outcome: str) -> str:
    """The colour of an outcome in the chart and the table."""
    return _OUTCOME_COLOURS.get(outcome, _OTHER_COLOUR)


def _chart(report: Report) -> _Chart:
    """Place the bars of URLs by outcome, the longest as long as the chart allows."""
    top = max([row.urls for row in report.outcomes] + [1])
    bars = []
    for index, row in enumerate(report.outcomes):
        middle = 8 + _ROW * index + _ROW // 2
        width = round(_BAR_LENGTH * row.urls / top, 1)
        bars.append(
            _Bar(row.outcome, row.urls, _colour(row.outcome), middle, width, _BAR_START + width + 6)
        )
    return _Chart(16 + _ROW * len(bars), _LABEL_END, _BAR_START, tuple(bars))


def _short(text: object, limit: int = _MAX_TEXT) -> str:
    """``text`` without control characters, cut to ``limit`` characters (the last one "…")."""
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(count: int, one: str, many: str | None = None) -> str:
    """``one`` for a count of one, else ``many`` (``one`` + "s" unless given)."""
    return one if count == 1 else (many or one + "s")


def _is_web_url(url: object) -> bool:
    """True for an ``http``/``https`` URL, the only kind the page makes a link of."""
    return isinstance(url, str) and _WEB_URL_RE.match(url) is not None


def _finalize(value: object) -> object:
    """What a template prints for ``value``: the templates' own markup (macros) as it is, any
    other value as text without control characters (autoescaping then escapes it)."""
    return value if hasattr(value, "__html__") else printable(value)


@functools.cache
def _environment() -> jinja2.Environment:
    # Imported here, not at the top: see "Cost" in the module docstring.
    import jinja2  # noqa: PLC0415

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("cdif_harvester.report", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,  # a name the model lacks is an error, not ""
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["short"] = _short
    environment.globals["plural"] = _plural
    environment.globals["colour"] = _colour
    environment.tests["web_url"] = _is_web_url
    return environment


def render_html(report: Report) -> str:
    """Render ``report`` as a complete HTML5 document (the page's text).

    Every value is escaped. Raises :class:`jinja2.TemplateError` only when the templates
    shipped with the package are broken or name something the model lacks.
    """
    template = _environment().get_template(_TEMPLATE)
    return template.render(report=report, chart=_chart(report))


def render_report(
    summary: Mapping[str, Any],
    outcomes: Iterable[Mapping[str, Any]],
    *,
    source: str | None = None,
    held: Iterable[HeldRecord] | None = None,
) -> str:
    """Render the publisher report of one harvest run as a complete HTML5 document.

    ``summary`` is the dict written to summary.json, ``outcomes`` the outcome dicts (the
    lines of outcomes.jsonl, or :func:`~cdif_harvester.model.outcome_to_dict`). With
    ``source`` (a source name, host, ``host:port`` or URL) the page covers that source's URLs
    only; with ``held`` (the records the catalogue holds when the run closes) it shows the
    records as they stand, with what the run changed marked. Every figure is counted from the
    inputs (see :func:`build_report`). Never raises for odd values in the inputs; all text is
    escaped.
    """
    return render_html(build_report(summary, outcomes, source=source, held=held))
