"""The operator's contact in the User-Agent every request sends.

Publishers read the User-Agent to reach whoever runs the harvester (a crawler that misbehaves
is reported to the address it names), so the operator sets their own: ``--operator-contact`` or
``CDIF_OPERATOR_CONTACT`` locally, the ``OperatorContact`` template parameter
(``OPERATOR_CONTACT``) on AWS. Without one, the product's own page is named.

See docs/decisions/0070-site-roots-backoff-and-contact.md.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from cdif_harvester import CONTACT_URL, PRODUCT, __version__

__all__ = ["CONTACT_ENV", "InvalidContact", "check_contact", "user_agent"]

#: The environment variable of the local commands' contact (``--operator-contact`` wins over it).
CONTACT_ENV = "CDIF_OPERATOR_CONTACT"

MAX_CONTACT_LENGTH = 256

# A bare e-mail address, taken as a mailto: URI (RFC 6068).
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# RFC 9110 section 5.6.5: a comment holds visible ASCII except its own delimiters and "\".
_FORBIDDEN = set("()\\")


class InvalidContact(ValueError):
    """A contact that cannot go in the User-Agent: not an http(s) URL, mailto: URI or e-mail
    address, or holding what a header comment may not (spaces, parentheses, non-ASCII)."""


def check_contact(text: str) -> str:
    """The contact as sent: an absolute http(s) URL, a ``mailto:`` URI, or an e-mail address
    (made a ``mailto:`` URI). Raises InvalidContact for anything else."""
    contact = text.strip()
    if not contact or len(contact) > MAX_CONTACT_LENGTH:
        raise InvalidContact(f"contact must be 1 to {MAX_CONTACT_LENGTH} characters")
    if any(not "!" <= char <= "~" or char in _FORBIDDEN for char in contact):
        raise InvalidContact(
            f"contact {contact!r}: only visible ASCII without spaces, '(', ')' or '\\'"
        )
    if _EMAIL.match(contact) and ":" not in contact:
        return f"mailto:{contact}"
    parts = urlsplit(contact)
    if parts.scheme in {"http", "https"} and parts.hostname:
        return contact
    if parts.scheme == "mailto" and _EMAIL.match(parts.path):
        return contact
    raise InvalidContact(
        f"contact {contact!r}: give an http(s) URL, a mailto: URI or an e-mail address"
    )


def user_agent(contact: str | None = None) -> str:
    """The User-Agent naming the product, its version and ``contact`` (checked), or the
    product's page when there is none. Raises InvalidContact."""
    named = check_contact(contact) if contact else CONTACT_URL
    return f"{PRODUCT}/{__version__} (+{named})"
