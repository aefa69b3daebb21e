"""The publisher report: how a harvest of a site went, and why records failed, as one HTML page.

:mod:`~cdif_harvester.report.model` says what the report says (figures, kinds of problem with
their fixes, FAIR Signposting levels), purely from what a run wrote;
:mod:`~cdif_harvester.report.render` lays that out as a self-contained page with the Jinja2
templates in ``templates/``. :func:`render_report` does both.

See docs/decisions/0044-what-the-publisher-report-says.md and
docs/decisions/0045-the-publisher-report-page.md.
"""

from cdif_harvester.report.model import (
    CHANGE_MEANINGS,
    FIXES,
    MAX_URL_ROWS,
    OUTCOME_MEANINGS,
    PATTERN_MEANINGS,
    HeldRecord,
    ProblemKind,
    Report,
    build_report,
    classify_error,
    classify_reason,
    classify_warning,
    signposting_level,
)
from cdif_harvester.report.render import render_html, render_report

__all__ = [
    "CHANGE_MEANINGS",
    "FIXES",
    "MAX_URL_ROWS",
    "OUTCOME_MEANINGS",
    "PATTERN_MEANINGS",
    "HeldRecord",
    "ProblemKind",
    "Report",
    "build_report",
    "classify_error",
    "classify_reason",
    "classify_warning",
    "render_html",
    "render_report",
    "signposting_level",
]
