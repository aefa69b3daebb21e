"""Stage 6: the crosswalk publishes the PID Kernel view and the Signposting views of a record.

It is triggered by the record landing under ``records/`` (an S3 event notification on AWS, its
local twin in the runner). Views are made for valid records only: an invalid record's report says
what to fix, and publishing kernel records from it would spread the errors.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus

from cdif_harvester.domain.crosswalk import (
    html_link_elements,
    link_header,
    linkset_json,
    linkset_text,
    pid_kernel_view,
    signposting_links,
)
from cdif_harvester.errors import PermanentError
from cdif_harvester.keys import parse_records_key, report_key, view_keys
from cdif_harvester.model import TypedLink
from cdif_harvester.stages import Ports

__all__ = ["build_views", "keys_from_s3_event"]


class NotARecordKey(PermanentError):
    """The notification names an object that is not a normalised record."""

    reason = "not-a-record-key"


def keys_from_s3_event(event: dict[str, Any]) -> list[str]:
    """Return the object keys named by an S3 event notification (URL-decoded).

    S3 sends a ``s3:TestEvent`` when a notification is configured; it names no object.
    """
    keys = []
    for record in event.get("Records", []):
        key = record.get("s3", {}).get("object", {}).get("key")
        if isinstance(key, str):
            keys.append(unquote_plus(key))
    return keys


def build_views(ports: Ports, key: str) -> dict[str, str]:
    """Write every view of the record under ``key``; return the view keys (empty if invalid).

    Raises NotARecordKey for a key outside ``records/``, KeyError when the record or its report
    is missing.
    """
    parsed = parse_records_key(key)
    if parsed is None:
        raise NotARecordKey(f"{key} is not a records/ key")
    source, rkey = parsed
    report = json.loads(ports.store.get(report_key(source, rkey)))
    if not report.get("valid"):
        return {}
    record = json.loads(ports.store.get(key))
    provenance = report.get("provenance", {})
    seen = [TypedLink(**link) for link in provenance.get("links", [])]
    links = signposting_links(record, seen)
    anchor = str(provenance.get("url") or record.get("schema:url") or record.get("@id"))
    targets = view_keys(source, rkey)
    bodies: dict[str, tuple[bytes, str]] = {
        "pid-kernel": (_json(pid_kernel_view(record)), "application/json"),
        "linkset-json": (_json(linkset_json(anchor, links)), "application/linkset+json"),
        "linkset": (linkset_text(anchor, links).encode("utf-8"), "application/linkset"),
        "link-header": (link_header(links).encode("utf-8"), "text/plain"),
        "html-links": (html_link_elements(links).encode("utf-8"), "text/html"),
    }
    for name, (body, content_type) in bodies.items():
        ports.store.put(targets[name], body, content_type=content_type)
    return targets


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")
