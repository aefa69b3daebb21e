"""A record's stored versions: what ``versions/`` and ``records/`` hold of one record.

The indexer keeps a record's latest version under ``records/`` and each version it replaced under
``versions/<source>/<record-hash>/<digest>.jsonld`` (earlier layouts also copied the latest
there). :func:`record_versions` lists them. See docs/decisions/0081-views-derived-on-read.md.
"""

from __future__ import annotations

from cdif_harvester.keys import record_hash, version_key
from cdif_harvester.model import CatalogEntry
from cdif_harvester.ports import ObjectStore

__all__ = ["record_versions"]


def record_versions(store: ObjectStore, entry: CatalogEntry) -> list[tuple[str, str, bool]]:
    """Return the versions of the record of ``entry`` kept in ``store``: (key, digest, latest)
    for each, the earlier ones in key order, then the latest (the key the entry names).

    A copy of the latest under ``versions/`` (written by earlier layouts) is not listed twice.
    Raises StorageError when the store cannot be listed.
    """
    latest = entry.content_hash[:32]
    prefix = version_key(entry.source, record_hash(entry.record_id), "").rsplit("/", 1)[0] + "/"
    earlier = []
    for key in store.list(prefix):
        digest = key.removeprefix(prefix).removesuffix(".jsonld")
        if digest != latest:
            earlier.append((key, digest, False))
    if entry.record_key is not None:
        earlier.append((entry.record_key, latest, True))
    return earlier
