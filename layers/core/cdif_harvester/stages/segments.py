"""Record segments: the indexer writes the records and reports of a batch of index jobs as one
object, and each catalogue entry names its range of it.

One S3 PUT is $5 per million; a record and its report were two. With ``record_segments`` set
(on AWS, the indexer's ``RECORD_SEGMENTS``), :func:`index_batch` plans every job of an SQS
batch first (:func:`~cdif_harvester.stages.index.plan_index`: reads only), writes what they
would write as one immutable segment per source, ``segments/<source>/<day>/<uuid>.seg``, then
lets each job write its catalogue entries, whose record and report keys are references
``<segment>#<offset>-<length>`` that the object stores read with one ranged GET. Beside each
segment, what the source's Signmap lists of its valid records (decision 0098). A job whose
planning fails runs alone, as without segments. See docs/decisions/0086-record-segments.md.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence

from cdif_harvester.contracts import IndexJob
from cdif_harvester.keys import record_hash, segment_key, segment_ref, segment_signposts_key
from cdif_harvester.model import UrlOutcome
from cdif_harvester.stages.crosswalk import Signposts, record_signposts, signposts_body
from cdif_harvester.stages.index import IndexPlan, apply_index, index_records, plan_index
from cdif_harvester.wiring import Wiring

__all__ = ["SEGMENT_MEDIA_TYPE", "index_batch", "write_segments"]

#: What a segment is: records and reports, each JSON, one after another with nothing between.
SEGMENT_MEDIA_TYPE = "application/octet-stream"

IndexStage = Callable[[Wiring, IndexJob], UrlOutcome]


def write_segments(wiring: Wiring, plans: Sequence[IndexPlan]) -> list[dict[str, str]]:
    """Write what ``plans`` would write as one segment per source; return, for each plan, the
    segment reference of each key it writes. Raises StorageError when a segment cannot be
    written (nothing of the batch is then in the catalogue)."""
    day = wiring.clock.now().date().isoformat()
    placed: list[dict[str, str]] = [{} for _ in plans]
    sources = sorted({plan.job.source for plan in plans})
    for source in sources:
        key = segment_key(source, day, uuid.uuid4().hex)
        parts: list[bytes] = []
        offset = 0
        for plan, where in zip(plans, placed, strict=True):
            if plan.job.source != source:
                continue
            for name, body in plan.writes():
                where[name] = segment_ref(key, offset, len(body))
                parts.append(body)
                offset += len(body)
        if parts:
            wiring.store.put(key, b"".join(parts), content_type=SEGMENT_MEDIA_TYPE)
            signposts = _signposts_of([plan for plan in plans if plan.job.source == source])
            if signposts:
                wiring.store.put(
                    segment_signposts_key(key),
                    signposts_body(signposts),
                    content_type="application/json",
                )
    return placed


def _signposts_of(plans: Sequence[IndexPlan]) -> dict[str, Signposts]:
    """What the source's Signmap lists of each valid record ``plans`` write, by record hash:
    written beside the segment, so that the Signmap reads one object per segment, not each
    record and report (decision 0098)."""
    found: dict[str, Signposts] = {}
    for plan in plans:
        for planned in plan.records:
            item = planned.item
            if planned.held is not None or not planned.valid or item.record is None:
                continue
            try:
                report = json.loads(planned.report)
                found[record_hash(item.record_id)] = record_signposts(report, item.record)
            except Exception:  # noqa: BLE001, S112 - the Signmap reads this record itself then
                continue
    return found


def index_batch(wiring: Wiring, jobs: Sequence[IndexJob]) -> IndexStage:
    """Prepare a batch of index jobs; return the stage to run on each of them.

    Without ``record_segments`` it is :func:`~cdif_harvester.stages.index.index_records`.
    With it, every job is planned and the batch's segments written now; the stage returned
    then writes each planned job's catalogue entries naming them. A job whose planning failed
    (its hand-over gone, a catalogue fault) is indexed alone by ``index_records``, which meets
    the same error and gives it its verdict. Raises StorageError when a segment cannot be
    written: nothing is in the catalogue yet, and the batch is delivered again.
    """
    if not wiring.settings.record_segments:
        return index_records
    plans: dict[IndexJob, IndexPlan] = {}
    for job in jobs:
        try:
            plans[job] = plan_index(wiring, job)
        except Exception:  # noqa: BLE001, S112 - the job, run alone, gets its error's verdict
            continue
    placed = dict(zip(plans, write_segments(wiring, list(plans.values())), strict=True))

    def stage(bundle: Wiring, job: IndexJob) -> UrlOutcome:
        plan = plans.get(job)
        if plan is None:
            return index_records(bundle, job)
        return apply_index(bundle, plan, placed[job])

    return stage
