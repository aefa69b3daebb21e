"""Who is calling, and what their key may do (see docs/api.md, "Authentication").

API Gateway checks the ``x-api-key`` header against its API keys and usage plan before the
function runs, and puts the id of the key it accepted in ``requestContext.identity.apiKeyId``.
The function maps that id to a role:

* an **operator**: the id is one of ``OPERATOR_API_KEY_IDS`` (comma-separated); may do anything;
* a **publisher**: any other key; may act on the sources whose ``publisher_keys`` hold its id
  (read them, start their runs with URLs on their hosts, read their runs, their Signmap, and the
  records harvested from their hosts), and on nothing else.

A request without a key id (a route deployed without ``ApiKeyRequired``, ``sam local
start-api``) is refused with 401 before its body is read; a body over 8 KiB (1 MiB for ``POST
/check``, whose body is a metadata document) with 413, one that is not UTF-8 text (or not valid
base64 when ``isBase64Encoded``) with 400, before it is parsed.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cdif_harvester.api.errors import ApiError, Forbidden, PayloadTooLarge, Unauthenticated
from cdif_harvester.model import CatalogEntry, RunStatus, Source
from cdif_harvester.stages.sources import host_allowed

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_CHECK_BODY_BYTES",
    "OPERATOR_KEYS_VARIABLE",
    "Caller",
    "admit",
    "operator_keys",
    "publisher_may_read_record",
    "require_operator",
    "require_run_access",
    "require_source_access",
]

OPERATOR_KEYS_VARIABLE = "OPERATOR_API_KEY_IDS"
#: The largest request body accepted; every body of this API is a small JSON object.
MAX_BODY_BYTES = 8 * 1024
#: The largest document ``POST /check`` takes: metadata records are some KiB to a few hundred;
#: the cap keeps a request (and its JSON answer) far below Lambda's 6 MB payload.
MAX_CHECK_BODY_BYTES = 1024 * 1024
# Routes (API Gateway resource paths) whose bodies may be larger than MAX_BODY_BYTES.
_BODY_CAPS: Mapping[str, int] = {"/check": MAX_CHECK_BODY_BYTES}


@dataclass(frozen=True)
class Caller:
    """The caller of one request: its API key id, and whether that key is an operator's."""

    key_id: str
    operator: bool

    def publishes(self, source: Source) -> bool:
        """True when the caller's key is one of ``source``'s publisher keys."""
        return self.key_id in source.publisher_keys


@lru_cache(maxsize=4)
def _parse_keys(text: str) -> frozenset[str]:
    return frozenset(item.strip() for item in text.split(",") if item.strip())


def operator_keys(env: Mapping[str, str] = os.environ) -> frozenset[str]:
    """The operator key ids named by ``OPERATOR_API_KEY_IDS`` (none when unset or empty).

    Read on every request (a dictionary look-up; the parsed set is cached), so a test or a
    configuration change never sees a stale list.
    """
    return _parse_keys(env.get(OPERATOR_KEYS_VARIABLE, ""))


def _body_size(event: Mapping[str, Any]) -> int:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        # The decoded size, computed without decoding.
        text = str(body).strip()
        return len(text) * 3 // 4 - text[-2:].count("=")
    # (surrogatepass: a body that is not UTF-8 text is measured here, refused by _readable)
    return len(str(body).encode("utf-8", "surrogatepass"))


def _bad_body(kind: str, message: str) -> ApiError:
    """The 400 for a body that cannot be read, in the shape of a request validation error."""
    return ApiError([{"loc": ["body"], "type": kind, "msg": message}], error="invalid-request")


def _readable(event: Mapping[str, Any]) -> None:
    """Raise ApiError (400 ``invalid-request``) when the body is not UTF-8 text: undecodable
    base64 (``isBase64Encoded``), bytes that are not UTF-8, or lone surrogates."""
    body = event.get("body")
    if not body:
        return
    text = str(body)
    if event.get("isBase64Encoded"):
        try:
            data = base64.b64decode(text.encode("ascii"))  # as Powertools decodes it
        except (UnicodeEncodeError, binascii.Error) as exc:
            raise _bad_body("base64", "the body is marked base64 but is not base64") from exc
    else:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _bad_body("utf8", "the body is not UTF-8 text") from exc
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad_body("utf8", f"the body is not UTF-8 text (byte {exc.start})") from exc


def admit(event: Mapping[str, Any], operators: Iterable[str]) -> Caller:
    """Return the caller of the API Gateway (REST, proxy) ``event``.

    Raises Unauthenticated when the event carries no API key id, PayloadTooLarge when its body
    is larger than MAX_BODY_BYTES, and ApiError (400 ``invalid-request``) when the body is not
    UTF-8 text: all before the body is parsed.
    """
    identity = (event.get("requestContext") or {}).get("identity") or {}
    key_id = identity.get("apiKeyId") if isinstance(identity, Mapping) else None
    if not isinstance(key_id, str) or not key_id.strip():
        raise Unauthenticated(
            "the request carries no API key identity: send your key in the x-api-key header "
            "(requestContext.identity.apiKeyId is absent)"
        )
    size = _body_size(event)
    cap = _BODY_CAPS.get(str(event.get("resource") or ""), MAX_BODY_BYTES)
    if size > cap:
        raise PayloadTooLarge(f"request body is {size} bytes; at most {cap} accepted")
    _readable(event)
    return Caller(key_id=key_id, operator=key_id in set(operators))


def require_operator(caller: Caller, what: str) -> None:
    """Raise Forbidden unless ``caller`` is an operator (``what`` names the action)."""
    if not caller.operator:
        raise Forbidden(f"{what} is for operators only; this API key is not an operator's")


def require_source_access(caller: Caller, source: Source, what: str) -> None:
    """Raise Forbidden unless ``caller`` is an operator or a publisher of ``source``."""
    if not (caller.operator or caller.publishes(source)):
        raise Forbidden(
            f"{what}: this API key is not a publisher key of source {source.source_id!r}"
        )


def require_run_access(caller: Caller, run: RunStatus, source: Source | None) -> None:
    """Raise Forbidden unless ``caller`` is an operator or a publisher of the run's source
    (an ad-hoc run, or one whose source is gone, is for operators only)."""
    if caller.operator or (source is not None and caller.publishes(source)):
        return
    raise Forbidden(f"run {run.run_id!r} is not a run of a source this API key publishes")


def publisher_may_read_record(
    caller: Caller, entry: CatalogEntry, sources: Iterable[Source]
) -> bool:
    """True when ``entry`` was harvested from a host of a source ``caller`` publishes."""
    return any(caller.publishes(s) and host_allowed(s, entry.url) for s in sources)
