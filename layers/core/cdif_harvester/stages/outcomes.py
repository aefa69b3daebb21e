"""Recording what happened to a URL: outcomes, the state held from earlier harvests, and the
end of a run (shared by every stage).

An outcome is written at once with its run's counters, or held by the wiring's outcome sink
(:class:`BatchOutcomes` on AWS) and written with the other outcomes of its batch when the batch
ends (docs/decisions/0089-settle-once-per-batch.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from cdif_harvester.errors import HarvestError
from cdif_harvester.model import (
    Outcome,
    RequestValidator,
    RunState,
    RunStatus,
    UrlOutcome,
    UrlState,
)
from cdif_harvester.ports import eventual
from cdif_harvester.wiring import Wiring

GONE_REASON = "no-metadata: gone (410 tombstone)"
"""How the reason of a URL that answered 410 Gone, and gave no metadata, starts: the publisher
says it is gone, so what it held is withdrawn when its run is closed (decision 0067)."""


def is_gone(outcome: UrlOutcome) -> bool:
    """Whether ``outcome`` is a 410 tombstone (see :data:`GONE_REASON`)."""
    return outcome.outcome is Outcome.NO_METADATA and (outcome.reason or "").startswith(GONE_REASON)


__all__ = [
    "GONE_REASON",
    "BatchOutcomes",
    "Unsettled",
    "put_outcome",
    "is_gone",
    "record_outcome",
    "outcome_now",
    "record_outcomes",
    "held_state",
    "held_states",
    "holds_records",
    "keep_validators",
    "finish_if_done",
    "settle",
]


def record_outcome(
    wiring: Wiring,
    *,
    run_id: str,
    source: str,
    url: str,
    outcome: Outcome,
    reason: str | None = None,
    pattern: str | None = None,
) -> UrlOutcome:
    """Record (and return) the outcome of one URL in one run."""
    result = outcome_now(
        wiring,
        run_id=run_id,
        source=source,
        url=url,
        outcome=outcome,
        reason=reason,
        pattern=pattern,
    )
    put_outcome(wiring, result)
    return result


def put_outcome(wiring: Wiring, outcome: UrlOutcome, state: UrlState | None = None) -> None:
    """Record ``outcome``, with the URL's harvest ``state`` when given (written together with
    the URL's latest outcome, decision 0092): held by the wiring's outcome sink until its batch
    ends when there is one, else written now with its run's counters (and the run marked
    finished when this was its last URL). Raises StorageError when the catalogue fails."""
    if wiring.outcomes is not None:
        wiring.outcomes.add(outcome, state=state)
    else:
        finish_if_done(wiring, wiring.catalog.put_outcome(outcome, state=state))


def outcome_now(
    wiring: Wiring,
    *,
    run_id: str,
    source: str,
    url: str,
    outcome: Outcome,
    reason: str | None = None,
    pattern: str | None = None,
) -> UrlOutcome:
    """The outcome of one URL in one run, stamped with the time now (not yet recorded)."""
    return UrlOutcome(
        run_id=run_id,
        source=source,
        url=url,
        outcome=outcome,
        reason=reason,
        pattern=pattern,
        recorded_at=wiring.clock.now().isoformat(timespec="seconds"),
    )


def record_outcomes(
    wiring: Wiring, outcomes: Sequence[UrlOutcome], states: Sequence[UrlState] = ()
) -> None:
    """Record many outcomes of one run at once (one catalogue write for the run's counters),
    and the harvest ``states`` of some of their URLs with their latest outcomes."""
    if outcomes:
        finish_if_done(wiring, wiring.catalog.put_outcomes(outcomes, states=states))


@dataclass(frozen=True)
class Unsettled:
    """Outcomes of the run ``run_id`` that :meth:`BatchOutcomes.flush` could not write: those
    held for the jobs ``keys``, and the error it met."""

    run_id: str
    keys: frozenset[str]
    error: Exception


_Held = tuple[UrlOutcome, UrlState | None]
"""An outcome held by :class:`BatchOutcomes`, and the URL's harvest state to write with it."""


class BatchOutcomes:
    """The outcome sink of one batch of jobs, each named by a key (on AWS its SQS message id).

    The outcomes a job settles while it runs (inside :meth:`job`) are held, and
    :meth:`flush` writes them when the batch ends: one :func:`record_outcomes` per run, so the
    run's counters move once per batch (in transactions of at most 99 outcomes and the move).
    A URL's harvest state added with its outcome is written with it (decision 0092).
    """

    def __init__(self) -> None:
        self._held: dict[str, list[_Held]] = {}
        self._running: list[_Held] | None = None

    @contextmanager
    def job(self, key: str) -> Iterator[None]:
        """Hold the outcomes added inside the block as those of the job ``key``. When the block
        raises they are dropped: the job failed, and the attempt that settles it is another."""
        added: list[_Held] = []
        self._running = added
        try:
            yield
        finally:
            self._running = None
        if added:  # (not reached when the block raised)
            self._held.setdefault(key, []).extend(added)

    def add(self, outcome: UrlOutcome, *, state: UrlState | None = None) -> None:
        """Hold ``outcome`` (and the URL's ``state`` to write with it) as the running job's.
        Raises RuntimeError outside :meth:`job`."""
        if self._running is None:
            raise RuntimeError(f"outcome of {outcome.url} settled outside a job of the batch")
        self._running.append((outcome, state))

    def drop(self, keys: Collection[str]) -> None:
        """Forget the outcomes held for the jobs ``keys`` (they are done again: their hand-overs
        could not be sent, decision 0093)."""
        for key in keys:
            self._held.pop(key, None)

    def flush(self, wiring: Wiring) -> list[Unsettled]:
        """Write every held outcome, run by run, and mark each run finished when it is done;
        return what could not be written (nothing is held after). The jobs of an
        :class:`Unsettled` must be done again: their outcomes' conditional writes (decision
        0054) count each URL once however often it is settled."""
        by_run: dict[str, list[tuple[str, _Held]]] = {}
        for key, items in self._held.items():
            for held in items:
                by_run.setdefault(held[0].run_id, []).append((key, held))
        self._held = {}
        unsettled: list[Unsettled] = []
        for run_id, run_held in by_run.items():
            outcomes = [outcome for _key, (outcome, _state) in run_held]
            states = [state for _key, (_o, state) in run_held if state is not None]
            try:
                record_outcomes(wiring, outcomes, states)
            except Exception as exc:  # noqa: BLE001 - whatever failed, the jobs are done again
                unsettled.append(Unsettled(run_id, frozenset(key for key, _h in run_held), exc))
        return unsettled


def held_state(wiring: Wiring, url: str, *, run_id: str) -> UrlState | None:
    """The URL's state when it last produced records in an earlier run than ``run_id`` and is
    still listed, else None: what incremental harvesting compares against (always None when it
    is off). What ``run_id`` itself wrote is not an earlier harvest: a retried or redelivered
    job of the run must end as its first attempt did."""
    if not wiring.settings.incremental:
        return None
    state = wiring.catalog.get_url(url)
    return state if state is not None and holds_records(state, run_id=run_id) else None


def held_states(wiring: Wiring, urls: Sequence[str], *, run_id: str) -> dict[str, UrlState]:
    """:func:`held_state` of many URLs at once (batched catalogue reads), by URL."""
    if not wiring.settings.incremental or not urls:
        return {}
    # Read eventually consistent where the catalogue can (half the price): a state read a
    # moment old is one the URL had, so the URLs settled unchanged on it are those an
    # expansion a moment earlier would have settled, an order concurrent runs may have anyway.
    # Nothing is written from the state, and a state this run wrote comes after the URL's
    # outcome in the run, which an outcome found at entry never replaces.
    catalog = wiring.catalog
    cheap = eventual(catalog)
    read = catalog.get_urls if cheap is None else cheap.peek_urls
    return {url: state for url, state in read(urls).items() if holds_records(state, run_id=run_id)}


def holds_records(state: UrlState, *, run_id: str) -> bool:
    """Whether ``state`` holds the records of a harvest earlier than ``run_id``'s (not
    withdrawn since)."""
    return bool(
        state.fingerprint
        and state.record_ids
        and not state.withdrawn_at
        and state.harvest_run != run_id
    )


def keep_validators(
    wiring: Wiring,
    state: UrlState | None,
    *,
    url: str,
    source: str,
    validators: Sequence[RequestValidator],
) -> None:
    """Keep the validators of a URL that gave no record in its state (``state``, as read
    before), so that the next harvest asks for it conditionally and downloads no body when
    nothing changed. Nothing is written when they are those already kept, or when the state
    holds records: its validators are then those of the answers the records came from.
    """
    if state is not None and state.record_ids and not state.withdrawn_at:
        return
    kept = tuple(validators)
    if state is None:
        if kept:
            wiring.catalog.put_url(UrlState(url=url, source=source, validators=kept))
    elif state.validators != kept:
        wiring.catalog.put_url(replace(state, validators=kept))


def finish_if_done(wiring: Wiring, status: RunStatus | None) -> bool:
    """Mark the run finished when ``status`` (the run's counters just written) says every URL
    that entered has its outcome and no sitemap job is left; True only for the one caller
    that marked it (see :mod:`cdif_harvester.stages.runs`)."""
    if status is None or status.state is RunState.FINISHED or not status.done:
        return False
    return wiring.catalog.finish_run(
        status.run_id, at=wiring.clock.now().isoformat(timespec="seconds")
    )


def settle(
    wiring: Wiring, *, run_id: str, source: str, url: str, error: HarvestError
) -> UrlOutcome:
    """Record the outcome a permanent (or finally given-up retryable) error ends a URL in.

    The reason is ``<code>: <details>`` so it is both machine-groupable and readable.
    """
    return record_outcome(
        wiring,
        run_id=run_id,
        source=source,
        url=url,
        outcome=Outcome(error.outcome),
        reason=f"{error.reason}: {error}",
    )
