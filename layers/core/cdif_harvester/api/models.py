"""The intake API's request bodies and response shapes (pydantic models).

Request models check types, required fields and sizes at the boundary (strict: a string where
a number belongs is refused, not converted; an unknown field is refused). What a value means is
checked by the core (:func:`~cdif_harvester.stages.sources.check_source`,
:func:`~cdif_harvester.stages.intake.check_entry_url`), so the rules live in one place.

Response models describe the bodies the routes return, for the OpenAPI document; the routes
build those bodies with the model's own ``*_to_dict`` functions, and the integration tests check
every answer against these models.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CheckAnswer",
    "ErrorBody",
    "HarvestRequest",
    "HarvestStarted",
    "NewSource",
    "OutcomeView",
    "OutcomesPage",
    "RecordRefView",
    "RecordView",
    "RecordsPage",
    "RunView",
    "RunsPage",
    "SourceHarvestRequest",
    "SourceList",
    "SourceReplacement",
    "SourceView",
]

#: A source id (the same rule as the sources registry's).
SOURCE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
#: An API Gateway API key id (what ``requestContext.identity.apiKeyId`` carries).
KEY_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
MAX_URL_LENGTH = 2048

_REQUEST = ConfigDict(extra="forbid", strict=True)
_RESPONSE = ConfigDict(extra="forbid")

Url = Annotated[str, Field(min_length=1, max_length=MAX_URL_LENGTH)]
Host = Annotated[str, Field(min_length=1, max_length=260)]
KeyId = Annotated[str, Field(pattern=KEY_ID_PATTERN)]


class _SourceFields(BaseModel):
    model_config = _REQUEST

    entry_url: Url = Field(
        description="Where a harvest of the source starts: a robots.txt, a sitemap or a page.",
        examples=["https://data.example.org/robots.txt"],
    )
    hosts: list[Host] = Field(
        default_factory=list,
        max_length=50,
        description="Hosts (host or host:port) the publisher may announce sitemaps and pages "
        "on; the entry URL's host always counts.",
        examples=[["data.example.org", "files.example.org"]],
    )
    schedule: str | None = Field(
        default=None,
        max_length=16,
        description="How often it is harvested: a number and m, h, d or w (at least 15m); "
        "null: only on demand.",
        examples=["1d"],
    )
    requests_per_host: int | None = Field(
        default=None, description="Requests in flight per host (1 to 16)."
    )
    crawl_delay: float | None = Field(
        default=None, description="Seconds between request starts on one host (0 to 60)."
    )
    options: dict[str, Annotated[str, Field(max_length=200)]] = Field(
        default_factory=dict,
        max_length=8,
        description="Resolution options, e.g. format_parameter (name=value).",
    )
    contact: str | None = Field(
        default=None, max_length=320, description="An e-mail address or an http(s) URL."
    )
    publisher_keys: list[KeyId] = Field(
        default_factory=list,
        max_length=20,
        description="API key ids the publisher calls the API with.",
    )


class NewSource(_SourceFields):
    """Body of ``POST /sources``: a source to register."""

    source_id: str = Field(
        pattern=SOURCE_ID_PATTERN,
        description="The operator's name for the source (a slug).",
        examples=["data-example-org"],
    )


class SourceReplacement(_SourceFields):
    """Body of ``PUT /sources/{source_id}``: the whole source (``source_id``, when given, must
    be the one in the path)."""

    source_id: str | None = Field(default=None, pattern=SOURCE_ID_PATTERN)


class HarvestRequest(BaseModel):
    """Body of ``POST /harvests``: an ad-hoc harvest of any URL."""

    model_config = _REQUEST

    url: Url = Field(
        description=(
            "A robots.txt, a sitemap (index), or any other URL (a landing page, a metadata "
            "document), harvested as if a sitemap listed it."
        ),
        examples=["https://data.example.org/robots.txt"],
    )
    options: dict[str, Annotated[str, Field(max_length=200)]] | None = Field(
        default=None, max_length=8, description="Resolution options, e.g. format_parameter."
    )


class SourceHarvestRequest(BaseModel):
    """Body of ``POST /sources/{source_id}/harvests`` (optional): a sitemap or robots.txt on
    one of the source's hosts to start from instead of its entry URL."""

    model_config = _REQUEST

    url: Url | None = Field(
        default=None,
        description="A sitemap or robots.txt URL on one of the source's hosts.",
        examples=["https://data.example.org/sitemap-datasets.xml"],
    )


class ErrorBody(BaseModel):
    """Every refusal, an RFC 9457 problem (application/problem+json): a stable code and what
    was wrong."""

    model_config = _RESPONSE

    type: str = Field(
        examples=["about:blank"],
        description="The problem type: about:blank, the problem is what its status says.",
    )
    title: str = Field(examples=["Forbidden"], description="The status's phrase.")
    status: int = Field(examples=[403], description="The HTTP status of the answer.")
    error: str = Field(examples=["host-not-allowed"])
    detail: Any = Field(
        description="Words, or for a request that does not match its schema a list of "
        '{"loc", "type", "msg"}.'
    )


class SourceView(BaseModel):
    """A registered source."""

    model_config = _RESPONSE

    source_id: str
    entry_url: str
    hosts: list[str]
    schedule: str | None
    requests_per_host: int | None
    crawl_delay: float | None
    options: dict[str, str]
    contact: str | None
    publisher_keys: list[str] = Field(
        description="Every key id for an operator; a publisher sees only its own."
    )
    created_at: str | None
    updated_at: str | None
    last_run_id: str | None
    last_run_at: str | None
    active_run: str | None


class SourceList(BaseModel):
    """Body of ``GET /sources``: one page of sources, by id."""

    model_config = _RESPONSE

    sources: list[SourceView]
    count: int = Field(description="Sources on this page.")
    truncated: bool = Field(description="True when more sources follow: ask for next_cursor.")
    next_cursor: str | None = Field(description="The cursor of the next page, when truncated.")


class HarvestStarted(BaseModel):
    """Body of a started run (202; its ``Location`` is the run)."""

    model_config = _RESPONSE

    run_id: str
    url: str = Field(description="The URL the run starts from.")
    source: str = Field(description="The harvested host's name in keys (host, or host_port).")
    source_id: str | None = Field(description="The registered source; null for ad-hoc runs.")
    run: str = Field(description="Path of the run's status.")


class RunView(BaseModel):
    """A run's progress (``GET /runs/{run_id}``)."""

    model_config = _RESPONSE

    run_id: str
    entry_urls: list[str]
    started_at: str
    source_id: str | None
    trigger: str
    state: str = Field(description="running, finished or stalled.")
    entered: int = Field(description="URLs that entered the run.")
    settled: int = Field(description="URLs that have their outcome.")
    queued: int = Field(description="URLs still on their way (entered - settled).")
    sitemaps: int = Field(description="Sitemap jobs still to do.")
    outcomes: dict[str, int] = Field(description="Settled URLs by outcome.")
    updated_at: str | None
    finished_at: str | None
    closed_at: str | None
    report_key: str | None
    report: str | None = Field(description="Path of the run's HTML report, once it is closed.")


class RunsPage(BaseModel):
    """Body of ``GET /sources/{source_id}/runs``: one page of a source's runs, newest first."""

    model_config = _RESPONSE

    source_id: str
    runs: list[RunView]
    count: int = Field(description="Runs on this page.")
    truncated: bool = Field(description="True when older runs follow: ask for next_cursor.")
    next_cursor: str | None = Field(description="The cursor of the next page, when truncated.")


class RecordRefView(BaseModel):
    """One record a URL produced, as listed in its outcome."""

    model_config = _RESPONSE

    record_id: str
    resource_id: str
    valid: bool
    errors: list[str]
    record: str | None
    report: str
    views: dict[str, str]


class OutcomeView(BaseModel):
    """The outcome of one URL in a run."""

    model_config = _RESPONSE

    run_id: str
    source: str
    url: str
    outcome: str
    reason: str | None
    pattern: str | None
    records: list[RecordRefView]
    recorded_at: str | None


class OutcomesPage(BaseModel):
    """Body of ``GET /runs/{run_id}/outcomes``: one page of outcomes."""

    model_config = _RESPONSE

    run_id: str
    outcomes: list[OutcomeView]
    count: int = Field(description="Outcomes on this page.")
    truncated: bool = Field(description="True when more outcomes follow: ask for next_cursor.")
    next_cursor: str | None


class RecordView(BaseModel):
    """A catalogue entry (``GET /records/{record_id}``), with the paths of its reports and
    views."""

    model_config = _RESPONSE

    record_id: str
    resource_id: str
    source: str
    url: str
    title: str | None
    pattern: str
    valid: bool
    conformance: str | None
    date_modified: str | None
    sd_date_published: str | None
    content_hash: str
    record_key: str | None
    report_key: str
    run_id: str
    harvested_at: str
    extra: dict[str, Any]
    changed_at: str | None
    withdrawn_at: str | None
    profiles: dict[str, str] = Field(
        default_factory=dict,
        description='The verdict of each CDIF profile judged, by "<profile>/<version>": '
        '"valid", "invalid" or "unknown" (core at the record\'s version first).',
    )
    links: dict[str, str] = Field(
        description="Paths of the record's report and (valid records only) views."
    )


class RecordsPage(BaseModel):
    """Body of ``GET /sources/{source_id}/records``: one page of catalogue entries."""

    model_config = _RESPONSE

    source_id: str
    records: list[RecordView]
    count: int
    truncated: bool
    next_cursor: str | None = Field(description="The cursor of the next page, when truncated.")


class CheckAnswer(BaseModel):
    """The report of ``POST /check``: what ``cdif-harvest check --json`` prints (see
    :class:`~cdif_harvester.stages.check.CheckReport`; each record's profiles, errors and
    warnings carry ``pointer``, ``message``, ``keyword``, ``title`` and ``fix``)."""

    model_config = ConfigDict(extra="forbid")

    target: str
    verdict: str = Field(description="valid, invalid, no-metadata or malformed")
    reason: str | None
    fix: str | None
    pattern: str | None
    shacl: bool
    counts: dict[str, int]
    records: list[dict[str, Any]]
    skipped: list[str]
    notes: list[str]
