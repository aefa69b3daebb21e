"""The pipeline stages: one function per stage, written against the ports only.

The same functions run inside the Lambda handlers (with the AWS adapters) and inside the local
runner (with the local adapters). Each takes a :class:`~cdif_harvester.wiring.Wiring` and one
validated message, sends the next message(s) or records the URL's outcome, and raises a
:class:`~cdif_harvester.errors.HarvestError` when it cannot: permanent errors become a recorded
outcome through :func:`~cdif_harvester.stages.outcomes.settle`, retryable ones are retried by
whoever drives the stage, and :class:`~cdif_harvester.errors.Deferred` (a host's politeness slot
is busy) is put back by the driver without counting an attempt.

``expand`` (sitemap expander) -> ``resolve`` (URL resolver) -> ``extract`` (extractor and
validator) -> ``index`` (indexer) -> ``crosswalk`` (views); ``intake``, ``sources``, ``runs`` and
``finish`` start, schedule and close runs; ``outcomes`` and ``jobs`` are what every stage shares.
"""
