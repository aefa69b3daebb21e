"""The DynamoDB catalogue's run accounting under injected faults (moto, faults through botocore's
event hooks): a transaction cancelled by a conflict is a fault to retry, never an answer, and an
outcome's move of the counters is counted exactly once whatever write fails, even when its item
is replaced before it was counted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws import DynamoCatalog
from cdif_harvester.errors import StorageError
from cdif_harvester.model import Outcome, RunStatus, UrlOutcome, UrlState
from tests.support.aws import ProvisionedStack

_T = TypeVar("_T")

pytestmark = pytest.mark.aws

# One attempt per call: the faults below would otherwise be retried by botocore first.
_ONE_TRY = Config(retries={"total_max_attempts": 1})
_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")


def _catalog(stack: ProvisionedStack) -> DynamoCatalog:
    dynamodb = boto3.resource("dynamodb", region_name=stack.region, config=_ONE_TRY)
    return DynamoCatalog(dynamodb.Table(stack.table_name))


def _response(parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None)
    return http, {**parsed, "ResponseMetadata": {"HTTPStatusCode": 400}}


def _conflict_once(codes: list[str]) -> Callable[..., Any]:
    """A before-call hook: the first TransactWriteItems is cancelled with ``codes`` as its
    items' reasons (nothing written), as DynamoDB does when another transaction held an item."""
    state = {"fired": False}

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if state["fired"]:
            return None
        state["fired"] = True
        return _response(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "injected"},
                "CancellationReasons": [{"Code": code} for code in codes],
            }
        )

    return answer


def _run(catalog: DynamoCatalog, run_id: str = "r1") -> None:
    catalog.start_run(
        RunStatus(run_id=run_id, entry_urls=("http://h/robots.txt",), started_at="2026-01-01")
    )


def test_a_conflicting_sitemap_count_is_retried_not_taken_as_counted(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    events = catalog.table.meta.client.meta.events
    events.register(
        "before-call.dynamodb.TransactWriteItems", _conflict_once(["TransactionConflict", "None"])
    )
    # When the count is cancelled by a conflict with another transaction, it is a fault
    with pytest.raises(StorageError, match="count sitemaps of r1"):
        catalog.count_sitemaps("r1", 2, step="s1")
    # and the retry counts it (it was not "already counted")
    status = catalog.count_sitemaps("r1", 2, step="s1")
    assert status is not None and status.sitemaps == 2
    # while a step counted already is an answer: counted once
    status = catalog.count_sitemaps("r1", 2, step="s1")
    assert status is not None and status.sitemaps == 2


def test_a_conflicting_entry_of_urls_is_retried_not_taken_as_counted(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    urls = ["http://h/a", "http://h/b"]
    events = catalog.table.meta.client.meta.events
    # The URLs' items are put; the transaction counting them (the chunk's marker, the run's
    # counters) is cancelled by a conflict on the marker
    events.register(
        "before-call.dynamodb.TransactWriteItems", _conflict_once(["TransactionConflict", "None"])
    )
    with pytest.raises(StorageError, match="enter URLs of run r1"):
        catalog.enter_urls("r1", urls, step="s1")
    # The retry finds the items put, counts them (they were not "counted already") and hands
    # them on
    assert catalog.enter_urls("r1", urls, step="s1") == urls
    status = catalog.get_run("r1")
    assert status is not None and status.entered == 2
    # and a third try counts nothing again
    assert catalog.enter_urls("r1", urls, step="s1") == urls
    status = catalog.get_run("r1")
    assert status is not None and status.entered == 2


@pytest.mark.parametrize("at_entry", [None, Outcome.UNCHANGED], ids=["queued", "settled"])
def test_a_url_settled_between_its_entry_and_its_count_is_still_counted(
    stack: ProvisionedStack, at_entry: Outcome | None
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    url = "http://h/a"
    entering = (
        [] if at_entry is None else [UrlOutcome(run_id="r1", source="s", url=url, outcome=at_entry)]
    )
    events = catalog.table.meta.client.meta.events
    # Given a part whose URL was put (queued, or settled by its lastmod), whose count then failed
    events.register(
        "before-call.dynamodb.TransactWriteItems", _conflict_once(["TransactionConflict", "None"])
    )
    with pytest.raises(StorageError, match="enter URLs of run r1"):
        catalog.enter_urls("r1", [url], step="s1", settled=entering)
    # and the URL's outcome recorded meanwhile (another part of the run listed it too)
    settled = UrlOutcome(run_id="r1", source="s", url=url, outcome=Outcome.DISALLOWED)
    catalog.put_outcome(settled)
    # When the part is tried again
    catalog.enter_urls("r1", [url], step="s1", settled=entering)
    # Then the URL counts as entered once, under the outcome it holds: the run is not finished
    # with an uncounted URL, nor counted twice as settled
    status = catalog.get_run("r1")
    assert status is not None
    assert (status.entered, status.settled) == (1, 1)
    assert {kind: n for kind, n in status.outcomes.items() if n} == {"disallowed": 1}


def _writes_of(catalog: DynamoCatalog, action: Callable[[], object]) -> int:
    """How many writes ``action`` makes when nothing fails (so that the crash points below are
    every write, not a number copied from the code)."""
    count = {"writes": 0}

    def hook(model: Any, **_: Any) -> None:
        if model.name in _WRITES:
            count["writes"] += 1

    events = catalog.table.meta.client.meta.events
    events.register("before-call.dynamodb", hook)
    try:
        action()
    finally:
        events.unregister("before-call.dynamodb", hook)
    return count["writes"]


def _fail_write(catalog: DynamoCatalog, n: int, *, after: bool) -> None:
    """Fail the catalogue's ``n``-th write from now on (see :func:`_fault_at`)."""
    hook = _fault_at(n, after=after)
    events = catalog.table.meta.client.meta.events
    events.register("before-call.dynamodb", hook)
    events.register("after-call.dynamodb", hook)


def _until_it_goes(action: Callable[[], _T]) -> _T:
    """Retry ``action`` after each StorageError, as SQS redelivers a job, up to three tries."""
    for _attempt in range(3):
        try:
            return action()
        except StorageError:
            continue
    raise AssertionError("still failing after three tries")


def _fault_at(n: int, *, after: bool) -> Callable[..., Any]:
    """A hook on every call that fails the ``n``-th write (1-based), before it reaches the table
    or after it was applied (the caller sees an error for a write that happened)."""
    count = {"writes": 0}

    def hook(model: Any, **kwargs: Any) -> Any:
        if model.name not in _WRITES:
            return None
        if not after and kwargs.get("event_name", "").startswith("after-call"):
            return None
        if after and kwargs.get("event_name", "").startswith("before-call"):
            count["writes"] += 1
            return None
        if not after:
            count["writes"] += 1
        if count["writes"] != n or count.get("fired"):
            return None
        count["fired"] = 1
        error = {"Error": {"Code": "ThrottlingException", "Message": f"injected at write {n}"}}
        if after:
            raise ClientError(error, model.name)
        return _response(error)

    return hook


_OUTCOME_WRITES = 3  # the run's item, the count, the URL's latest outcome


def _outcome(outcome: Outcome, url: str = "http://h/a", run_id: str = "r1") -> UrlOutcome:
    return UrlOutcome(run_id=run_id, source="s", url=url, outcome=outcome, recorded_at="t")


def test_the_crash_points_of_an_outcome_are_every_write(stack: ProvisionedStack) -> None:
    catalog = _catalog(stack)
    _run(catalog, "clean")
    catalog.enter_urls("clean", ["http://h/a"], step="s1")
    writes = _writes_of(
        catalog, lambda: catalog.put_outcome(_outcome(Outcome.RECORD, run_id="clean"))
    )
    assert writes == _OUTCOME_WRITES


@pytest.mark.parametrize("after", [False, True], ids=["before-the-write", "after-the-write"])
@pytest.mark.parametrize("n", range(1, _OUTCOME_WRITES + 1))
def test_an_outcome_and_its_count_survive_a_fault_at_any_write(
    stack: ProvisionedStack, n: int, after: bool
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    catalog.enter_urls("r1", ["http://h/a"], step="s1")
    _fail_write(catalog, n, after=after)
    outcome = UrlOutcome(
        run_id="r1", source="s", url="http://h/a", outcome=Outcome.RECORD, recorded_at="t"
    )
    # When recording the outcome fails at the n-th write, and the job is retried until it goes
    status = _until_it_goes(lambda: catalog.put_outcome(outcome))
    # Then the run is settled exactly once, and the URL's latest outcome is the record
    assert status is not None
    assert (status.entered, status.settled, status.outcomes["record"]) == (1, 1, 1)
    assert status.done
    latest = catalog.get_url("http://h/a")
    assert latest is not None and latest.outcome == "record"


# 4 puts, the count, the late URL's settling (its put, its count), 3 latest outcomes
_SETTLED_AT_ENTRY_WRITES = 10


def _settled_at_entry(run_id: str) -> list[UrlOutcome]:
    return [
        UrlOutcome(run_id=run_id, source="s", url=url, outcome=Outcome.UNCHANGED, recorded_at="t")
        for url in ("http://h/a", "http://h/b", "http://h/late")
    ]


def test_the_crash_points_of_urls_settled_at_entry_are_every_write(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog, "clean")
    catalog.enter_urls("clean", ["http://h/late"], step="s1")
    writes = _writes_of(
        catalog,
        lambda: catalog.enter_urls(
            "clean", ["http://h/q"], step="s1", settled=_settled_at_entry("clean")
        ),
    )
    assert writes == _SETTLED_AT_ENTRY_WRITES


@pytest.mark.parametrize("after", [False, True], ids=["before-the-write", "after-the-write"])
@pytest.mark.parametrize("n", range(1, _OUTCOME_WRITES + 1))
def test_a_state_written_with_its_outcome_survives_a_fault_at_any_write(
    stack: ProvisionedStack, n: int, after: bool
) -> None:
    catalog = _catalog(stack)
    url = "http://h/a"
    # Given a URL whose latest outcome is an earlier run's record, with that run's state
    earlier = UrlOutcome(run_id="r0", source="s", url=url, outcome=Outcome.RECORD, recorded_at="t")
    catalog.put_outcome(earlier, state=UrlState(url=url, source="s", harvest_run="r0"))
    _run(catalog)
    catalog.enter_urls("r1", [url], step="s1")
    _fail_write(catalog, n, after=after)
    outcome = replace(earlier, run_id="r1")
    state = UrlState(url=url, source="s", fingerprint="f", record_ids=("x",), harvest_run="r1")
    # When this run's record outcome and state fail at the n-th write (the run's transaction,
    # the URL's item), and the job is retried until it goes
    status = _until_it_goes(lambda: catalog.put_outcome(outcome, state=state))
    # Then the run is settled exactly once, and the URL holds this run's state and outcome
    assert status is not None
    assert (status.entered, status.settled, status.outcomes["record"]) == (1, 1, 1)
    assert catalog.get_url(url) == replace(state, outcome="record", last_run="r1", last_seen="t")


@pytest.mark.parametrize("after", [False, True], ids=["before-the-write", "after-the-write"])
@pytest.mark.parametrize("n", range(1, _SETTLED_AT_ENTRY_WRITES + 1))
def test_urls_settled_at_entry_count_once_whatever_write_fails(
    stack: ProvisionedStack, n: int, after: bool
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    catalog.enter_urls("r1", ["http://h/late"], step="s1")  # entered queued by an earlier try
    settled = _settled_at_entry("r1")
    _fail_write(catalog, n, after=after)
    # When entering URLs, some settled by their lastmod, fails at the n-th write (a URL's put,
    # the entry's count, the late URL's settling, the URLs' latest outcomes), and the job is
    # retried
    handed = _until_it_goes(
        lambda: catalog.enter_urls("r1", ["http://h/q"], step="s1", settled=settled)
    )
    # Then every URL counts once, the queued one is handed on, and each settled URL's latest
    # outcome is written
    assert handed == ["http://h/q"]
    status = catalog.get_run("r1")
    assert status is not None
    assert (status.entered, status.settled, status.outcomes["unchanged"]) == (4, 3, 3)
    for outcome in settled:
        latest = catalog.get_url(outcome.url)
        assert latest is not None and latest.outcome == "unchanged", outcome.url


_ENTRY_URLS = [f"http://h/{i}" for i in range(5)]
_ENTRY_WRITES = 6  # a put per URL, one count


def test_the_crash_points_of_an_entry_are_every_write(stack: ProvisionedStack) -> None:
    catalog = _catalog(stack)
    _run(catalog, "clean")
    writes = _writes_of(catalog, lambda: catalog.enter_urls("clean", _ENTRY_URLS, step="s1"))
    assert writes == _ENTRY_WRITES


@pytest.mark.parametrize("after", [False, True], ids=["before-the-write", "after-the-write"])
@pytest.mark.parametrize("n", range(1, _ENTRY_WRITES + 1))
def test_urls_enter_once_whatever_write_fails(stack: ProvisionedStack, n: int, after: bool) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    catalog.enter_urls("r1", _ENTRY_URLS[:1], step="s0")  # one of them listed by another part
    _fail_write(catalog, n, after=after)
    # When entering URLs fails at the n-th write (a URL's put, or the count after them), and
    # the job is retried until it goes
    handed = _until_it_goes(lambda: catalog.enter_urls("r1", _ENTRY_URLS, step="s1"))
    # Then the URLs the other part entered is left to it, the others are handed on, and every
    # URL counts once
    assert handed == _ENTRY_URLS[1:]
    status = catalog.get_run("r1")
    assert status is not None and (status.entered, status.settled) == (5, 0)


def _fail_put(number: int) -> Callable[..., Any]:
    """An after-call hook: the ``number``-th PutItem is applied, and its caller sees an error
    (a crash after it: the rest of the entry is not done)."""
    count = {"puts": 0}

    def hook(**_: Any) -> None:
        count["puts"] += 1
        if count["puts"] == number:
            error = {"Error": {"Code": "ThrottlingException", "Message": "injected"}}
            raise ClientError(error, "PutItem")

    return hook


def test_urls_a_crashed_entry_put_are_counted_once_by_whoever_enters_them_next(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    a, b, c, d = (f"http://h/{name}" for name in "abcd")
    events = catalog.table.meta.client.meta.events
    events.register("after-call.dynamodb.PutItem", _fail_put(2))
    # Given a part that put the items of a and b, then crashed before counting them
    with pytest.raises(StorageError):
        catalog.enter_urls("r1", [a, b, c], step="s1")
    # When its retry reads another list (b, c, d: the sitemap changed meanwhile)
    assert catalog.enter_urls("r1", [b, c, d], step="s1") == [b, c, d]
    # Then b is counted once with the new ones; a is in no list of the run's now, uncounted
    status = catalog.get_run("r1")
    assert status is not None and status.entered == 3
    # and when another part lists a, it is counted and handed on there (it was never on its way)
    assert catalog.enter_urls("r1", [a, b], step="s2") == [a]
    status = catalog.get_run("r1")
    assert status is not None and status.entered == 4
    # while the first list, tried again, hands on what its part entered and counts nothing twice
    assert catalog.enter_urls("r1", [a, b, c], step="s1") == [a, b, c]
    status = catalog.get_run("r1")
    assert status is not None and status.entered == 4


def test_copies_of_a_part_racing_between_its_puts_and_its_count_count_each_url_once(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    urls = [f"http://h/{i}" for i in range(6)]
    puts = {"n": 0}
    raced: dict[str, list[str]] = {}

    def count_puts(**_: Any) -> None:
        puts["n"] += 1

    def race(**_: Any) -> None:
        # Between this part's puts and its count: two more copies of the part run to the end,
        # one listing fewer URLs (the sitemap changed), one the same
        if puts["n"] < len(urls) or raced:
            return
        raced["fewer"] = []
        raced["fewer"] = catalog.enter_urls("r1", urls[2:], step="s1")
        raced["same"] = catalog.enter_urls("r1", urls, step="s1")

    events = catalog.table.meta.client.meta.events
    events.register("before-call.dynamodb.PutItem", count_puts)
    events.register("before-call.dynamodb.TransactWriteItems", race)
    # When a part's URLs are put and, before it counts them, other copies count them
    assert catalog.enter_urls("r1", urls, step="s1") == urls
    # Then every copy hands its URLs on (they are its part's), and each URL counts once
    assert raced == {"fewer": urls[2:], "same": urls}
    status = catalog.get_run("r1")
    assert status is not None and (status.entered, status.settled) == (6, 0)


def _settled_uncounted(catalog: DynamoCatalog, outcome: Outcome, run_id: str = "r1") -> None:
    """Record ``outcome`` for http://h/a, crashing between the put of its run item and the
    transaction counting it (a conflict cancels the count: nothing counted)."""
    events = catalog.table.meta.client.meta.events
    events.register(
        "before-call.dynamodb.TransactWriteItems", _conflict_once(["TransactionConflict", "None"])
    )
    try:
        with pytest.raises(StorageError, match=f"record outcomes of run {run_id}"):
            catalog.put_outcome(_outcome(outcome, run_id=run_id))
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems")


def _settled_counts(status: RunStatus | None) -> tuple[int, int, dict[str, int]]:
    assert status is not None
    outcomes = {kind: n for kind, n in status.outcomes.items() if n}
    return status.entered, status.settled, outcomes


@pytest.mark.parametrize("then", [Outcome.RECORD, Outcome.DISALLOWED], ids=["same", "other"])
def test_an_outcome_put_but_not_counted_is_counted_by_the_next_settling(
    stack: ProvisionedStack, then: Outcome
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    catalog.enter_urls("r1", ["http://h/a"], step="s1")
    # Given a URL's record outcome put, whose count then failed (the job crashed)
    _settled_uncounted(catalog, Outcome.RECORD)
    assert _settled_counts(catalog.get_run("r1")) == (1, 0, {})
    # When another job settles the URL (a retry, or another outcome for it) before the retry
    status = catalog.put_outcome(_outcome(then))
    # Then the move of the earlier write is counted too, once: the run is settled once, under
    # the outcome the URL holds
    assert _settled_counts(status) == (1, 1, {then.value: 1})
    # and the crashed job's retry moves the counters from there, once
    status = catalog.put_outcome(_outcome(Outcome.RECORD))
    assert _settled_counts(status) == (1, 1, {"record": 1})
    assert _settled_counts(catalog.put_outcome(_outcome(Outcome.RECORD))) == (1, 1, {"record": 1})


_OVER_UNCOUNTED_WRITES = 4  # the earlier write's count, the run's item, its count, the latest


def test_the_crash_points_of_settling_over_an_uncounted_outcome_are_every_write(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog, "clean")
    catalog.enter_urls("clean", ["http://h/a"], step="s1")
    _settled_uncounted(catalog, Outcome.RECORD, "clean")
    writes = _writes_of(
        catalog, lambda: catalog.put_outcome(_outcome(Outcome.DISALLOWED, run_id="clean"))
    )
    assert writes == _OVER_UNCOUNTED_WRITES


@pytest.mark.parametrize("after", [False, True], ids=["before-the-write", "after-the-write"])
@pytest.mark.parametrize("n", range(1, _OVER_UNCOUNTED_WRITES + 1))
def test_settling_over_an_uncounted_outcome_counts_both_once_whatever_write_fails(
    stack: ProvisionedStack, n: int, after: bool
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    catalog.enter_urls("r1", ["http://h/a"], step="s1")
    _settled_uncounted(catalog, Outcome.RECORD)  # put, never counted
    _fail_write(catalog, n, after=after)
    # When another outcome for the URL fails at the n-th write, and its job is retried
    status = _until_it_goes(lambda: catalog.put_outcome(_outcome(Outcome.DISALLOWED)))
    # Then the run counts the URL once, settled under the outcome it holds
    assert _settled_counts(status) == (1, 1, {"disallowed": 1})
    latest = catalog.get_url("http://h/a")
    assert latest is not None and latest.outcome == "disallowed"


def test_a_settling_racing_between_a_put_and_its_count_counts_each_move_once(
    stack: ProvisionedStack,
) -> None:
    catalog = _catalog(stack)
    _run(catalog)
    urls = ["http://h/a", "http://h/b"]
    catalog.enter_urls("r1", urls, step="s1")
    raced: dict[str, RunStatus | None] = {}

    def race(**_: Any) -> None:
        # Between this job's puts and its count: another job settles one of its URLs otherwise
        # (it counts this job's uncounted write first), and a copy of this job runs to the end
        if raced:
            return
        raced["other"] = None
        raced["other"] = catalog.put_outcome(_outcome(Outcome.DISALLOWED, urls[0]))
        raced["copy"] = catalog.put_outcomes([_outcome(Outcome.RECORD, url) for url in urls])

    events = catalog.table.meta.client.meta.events
    events.register("before-call.dynamodb.TransactWriteItems", race)
    status = catalog.put_outcomes([_outcome(Outcome.RECORD, url) for url in urls])
    # Then every move is counted once: the other job counts the first write it replaced (the
    # URL the job had not counted yet is still to count), the copy the rest, and the job
    # itself nothing twice
    assert _settled_counts(raced["other"]) == (2, 1, {"disallowed": 1})
    assert _settled_counts(raced["copy"]) == (2, 2, {"record": 2})
    assert _settled_counts(status) == (2, 2, {"record": 2})
    assert {o.url: o.outcome for o in catalog.outcomes("r1")} == dict.fromkeys(urls, Outcome.RECORD)
