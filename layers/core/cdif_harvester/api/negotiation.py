"""Proactive content negotiation on ``Accept`` (RFC 9110, section 12.5.1), for the few
representations a resource of the API has."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["negotiate"]


def _ranges(accept: str) -> list[tuple[str, float]]:
    """The media ranges of an Accept value with their weights (a bad weight counts as 0)."""
    found: list[tuple[str, float]] = []
    for item in accept.split(","):
        media_range, *params = (part.strip() for part in item.split(";"))
        if "/" not in media_range:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0
        found.append((media_range.lower(), max(0.0, min(weight, 1.0))))
    return found


def _weight(media_type: str, ranges: list[tuple[str, float]]) -> float:
    """The weight the most specific matching range gives ``media_type`` (0 when none does)."""
    kind = media_type.split("/", 1)[0]
    best: tuple[int, float] = (-1, 0.0)
    for media_range, weight in ranges:
        if media_range == media_type:
            specificity = 2
        elif media_range == f"{kind}/*":
            specificity = 1
        elif media_range == "*/*":
            specificity = 0
        else:
            continue
        if specificity > best[0]:
            best = (specificity, weight)
    return best[1]


def negotiate(accept: str | None, offered: Sequence[str]) -> str | None:
    """Return the media type of ``offered`` that ``accept`` prefers, or None when it allows
    none of them. The first of ``offered`` is the default: taken when there is no Accept (or
    one with no media range), and on a tie."""
    if not offered:
        return None
    ranges = _ranges(accept or "")
    if not ranges:
        return offered[0]
    weights = [_weight(media_type, ranges) for media_type in offered]
    best = max(weights)
    return offered[weights.index(best)] if best > 0 else None
