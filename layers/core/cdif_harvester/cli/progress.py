"""What a local harvest shows while it runs: a live line on a terminal, a line log elsewhere.

:class:`ProgressSnapshot` is what the runner knows at one moment; :func:`progress_for` picks the
display: :class:`LiveProgress` on a terminal (one status line redrawn in place, cleared at the
end, colour unless ``NO_COLOR``), the plain stream otherwise (the runner then writes the line
log). With ``verbose`` every URL's outcome is printed as it settles.

See docs/decisions/0069-cli-exit-codes-and-progress.md.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TextIO, runtime_checkable

from cdif_harvester.model import Outcome, UrlOutcome

__all__ = [
    "LiveProgress",
    "LogProgress",
    "ProgressOut",
    "ProgressSnapshot",
    "StatusView",
    "colour_allowed",
    "progress_for",
]

# Outcomes that deserve the eye's attention on a terminal (SGR colour codes).
_COLOURS = {
    Outcome.RECORD.value: "32",  # green
    Outcome.UNCHANGED.value: "36",  # cyan
    Outcome.FAILED.value: "31",  # red
    Outcome.BLOCKED.value: "31",
    Outcome.DISALLOWED.value: "33",  # yellow
    Outcome.NO_METADATA.value: "33",
}
_CLEAR = "\r\x1b[K"  # back to the start of the line, erase to its end


class ProgressOut(Protocol):
    """Where progress text goes: a text stream (``sys.stderr``, ``io.StringIO``) or a view."""

    def write(self, text: str, /) -> int:
        """Write ``text``; return the number of characters written."""
        ...

    def flush(self) -> None:
        """Flush what was written."""
        ...


@dataclass(frozen=True)
class ProgressSnapshot:
    """The state of a run at one moment, as the runner sees it."""

    done: Mapping[str, int]  # settled URLs by outcome
    entered: int  # URLs known to the run so far (grows while sitemaps are expanded)
    waiting_sitemaps: int
    waiting_urls: int
    waiting_documents: int
    running: int
    hosts: int
    outcomes: Sequence[UrlOutcome] = field(default_factory=tuple)  # only for a verbose view

    @property
    def settled(self) -> int:
        """URLs that have their outcome."""
        return sum(self.done.values())

    def line(self) -> str:
        """The line of the line log (the form written when stderr is not a terminal)."""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.done.items()) if v) or "-"
        return (
            f"  {self.settled} URLs done ({counts}); "
            f"waiting: {self.waiting_sitemaps} sitemaps, {self.waiting_urls} URLs, "
            f"{self.waiting_documents} documents; "
            f"running: {self.running} on {self.hosts} host{'s' if self.hosts != 1 else ''}"
        )


@runtime_checkable
class StatusView(Protocol):
    """A display the runner hands snapshots to instead of writing the line log."""

    interval: float  # seconds between two snapshots
    verbose: bool  # wants ``outcomes`` in the snapshots

    def status(self, snapshot: ProgressSnapshot) -> None:
        """Show ``snapshot``."""
        ...

    def write(self, text: str, /) -> int:
        """Write a log line (``text`` as ``print`` passes it)."""
        ...

    def flush(self) -> None:
        """Flush the stream."""
        ...


def colour_allowed(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """True when ``stream`` is a terminal and ``NO_COLOR`` is unset or empty (no-color.org)."""
    env = os.environ if environ is None else environ
    return _is_terminal(stream, env) and not env.get("NO_COLOR")


def _is_terminal(stream: TextIO, env: Mapping[str, str]) -> bool:
    try:
        return stream.isatty() and env.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a closed or unusual stream is no terminal
        return False


class _Outcomes:
    """Prints each URL's outcome once (the verbose part shared by both displays)."""

    def __init__(self, *, colour: bool) -> None:
        self._colour = colour
        self._seen: set[str] = set()

    def lines(self, outcomes: Sequence[UrlOutcome]) -> list[str]:
        lines = []
        for outcome in outcomes:
            if outcome.url in self._seen:
                continue
            self._seen.add(outcome.url)
            name = _paint(outcome.outcome.value, self._colour)
            reason = f" ({outcome.reason})" if outcome.reason else ""
            lines.append(f"  {name} {outcome.url}{reason}")
        return lines


class LogProgress:
    """The line log, with every URL's outcome as it settles (``-v`` when not a terminal)."""

    interval = 1.0

    def __init__(self, out: TextIO) -> None:
        self.verbose = True
        self._out = out
        self._outcomes = _Outcomes(colour=False)

    def status(self, snapshot: ProgressSnapshot) -> None:
        """Write the outcomes settled since the last snapshot, then the snapshot's line."""
        for line in self._outcomes.lines(snapshot.outcomes):
            self._out.write(line + "\n")
        self._out.write(snapshot.line() + "\n")
        self._out.flush()

    def write(self, text: str, /) -> int:
        """Pass a log line through."""
        return self._out.write(text)

    def flush(self) -> None:
        """Flush the stream."""
        self._out.flush()


class LiveProgress:
    """One status line on a terminal, redrawn in place with ``\\r``: URLs done of those known,
    the rate, an estimate of the time left, outcomes so far. Log lines are written above it;
    :meth:`close` clears it."""

    interval = 0.2

    def __init__(
        self,
        out: TextIO,
        *,
        colour: bool,
        verbose: bool = False,
    ) -> None:
        self.verbose = verbose
        self._out = out
        self._colour = colour
        self._started = time.monotonic()
        self._drawn = False
        self._outcomes = _Outcomes(colour=colour)

    def status(self, snapshot: ProgressSnapshot) -> None:
        """Redraw the status line for ``snapshot`` (verbose: the new outcomes above it)."""
        self._clear()
        for line in self._outcomes.lines(snapshot.outcomes):
            self._out.write(line + "\n")
        self._out.write(self._fit(self._text(snapshot)))
        self._out.flush()
        self._drawn = True

    def write(self, text: str, /) -> int:
        """Write a log line above the status line (it is redrawn at the next snapshot)."""
        if text and text != "\n":
            self._clear()
        return self._out.write(text)

    def flush(self) -> None:
        """Flush the stream."""
        self._out.flush()

    def close(self) -> None:
        """Clear the status line: what follows starts on a clean line (and the rate of a next
        run, as ``schedule`` makes, is counted from now)."""
        self._clear()
        self._out.flush()
        self._started = time.monotonic()

    def _clear(self) -> None:
        if self._drawn:
            self._out.write(_CLEAR)
            self._drawn = False

    def _text(self, snapshot: ProgressSnapshot) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        done = snapshot.settled
        rate = done / elapsed
        # While sitemaps are still being read the total grows: say so with a "+".
        more = "+" if snapshot.waiting_sitemaps else ""
        total = max(snapshot.entered, done)
        left = total - done
        eta = _duration(left / rate) if rate > 0 and left else ("-" if not left else "?")
        counts = " ".join(
            f"{_paint(kind, self._colour)} {count}"
            for kind, count in sorted(snapshot.done.items())
            if count
        )
        return (
            f"{done}/{total}{more} URLs  {rate:.1f}/s  ETA {eta}"
            f"{'  ' + counts if counts else ''}  ({snapshot.running} running)"
        )

    def _fit(self, text: str) -> str:
        # A line longer than the terminal wraps, and \r then redraws only its last part.
        width = shutil.get_terminal_size((80, 24)).columns - 1
        visible = _visible_length(text)
        if visible <= width:
            return text
        return _strip_colour(text)[: max(width, 10)]


def progress_for(
    stream: TextIO, *, verbose: bool = False, environ: Mapping[str, str] | None = None
) -> ProgressOut:
    """The display for ``stream``: live on a terminal, the line log (verbose: with every
    URL's outcome) otherwise."""
    env = os.environ if environ is None else environ
    if _is_terminal(stream, env):
        return LiveProgress(stream, colour=colour_allowed(stream, env), verbose=verbose)
    return LogProgress(stream) if verbose else stream


def _paint(text: str, colour: bool) -> str:
    code = _COLOURS.get(text)
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def _strip_colour(text: str) -> str:
    out, skipping = [], False
    for char in text:
        if char == "\x1b":
            skipping = True
        elif skipping and char == "m":
            skipping = False
        elif not skipping:
            out.append(char)
    return "".join(out)


def _visible_length(text: str) -> int:
    return len(_strip_colour(text))


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
