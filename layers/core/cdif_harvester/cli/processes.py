"""Reading documents in other processes: the local runner's pool for the extractor's CPU work.

Each process is ``python -m cdif_harvester.cli.processes`` with pipes for stdin and stdout. A
task is a document job's message (the contract's own JSON) with what the held harvest says of
its blocks; the answer is the index job's message (its staged object written when too large
for it) with the part of that job's work that needs no catalogue (``prepare_index``), the
extractor's hand-over when no record was found (``encode_staged``), the reason the blocks are
unchanged, or the error's verdict. Nothing else crosses: each process reads the output directory
with its own object store and never the catalogue, which the runner alone writes. A process
that dies loses its tasks to the runner (:meth:`StagePool.answers`), never silently.

See docs/decisions/0090-local-stages-in-processes.md and 0095-index-work-prepared-in-processes.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

try:  # (POSIX only: without it the pipes keep the system's size)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

import cdif_harvester
from cdif_harvester.contracts import (
    DocumentJob,
    IndexJob,
    StagedRecords,
    decode,
    decode_staged,
    encode_staged,
)
from cdif_harvester.errors import HarvestError, PermanentError, RetryableError
from cdif_harvester.stages.extract import (
    Extraction,
    HeldBlocks,
    carried_state,
    hand_over,
    held_blocks,
    read_documents,
)
from cdif_harvester.stages.index import PreparedIndex, prepare_index
from cdif_harvester.stages.jobs import verdict

__all__ = [
    "MAX_PROCESSES",
    "Answer",
    "StagePool",
    "WorkerDied",
    "command",
    "default_processes",
    "error_of",
    "task_message",
]

logger = logging.getLogger(__name__)

#: The most processes a harvest may ask for: more only multiplies memory.
MAX_PROCESSES = 64
# Tasks sent to one process before its first is answered: one running, one waiting in its pipe,
# so it never waits for the runner between two documents.
_DEPTH = 2
# A pool whose processes die this many times before they are ready is given up (a broken
# installation, not a bad document): the runner reads the documents itself.
_STILLBORN = 3
_HEADER = struct.Struct(">I")


class WorkerDied(RetryableError):
    """The process reading a job's documents died (killed, out of memory) before answering."""

    reason = "worker-died"


def default_processes() -> int:
    """The processes a harvest uses unless told: one per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (not on Linux)
        return max(1, os.cpu_count() or 1)


def task_message(task_id: int, job_message: str, held: HeldBlocks | None) -> bytes:
    """The task of reading the documents of the job ``job_message`` (its queue message)."""
    data: dict[str, Any] = {"id": task_id}
    if held is not None:
        data["held"] = {"blocks": list(held.blocks), "sd_dates": list(held.sd_dates)}
    return _frame(data, job_message.encode("utf-8"))


def _frame(head: dict[str, Any], payload: bytes = b"") -> bytes:
    """A task or an answer: its head (JSON, on one line), a newline, then its payload as it
    is (a message with a document inside: not escaped again within the head's JSON)."""
    return json.dumps(head, separators=(",", ":")).encode("ascii") + b"\n" + payload


def _unframe(raw: bytes) -> tuple[dict[str, Any], bytes]:
    """The head and the payload of a frame :func:`_frame` made."""
    head, _, payload = raw.partition(b"\n")
    data: dict[str, Any] = json.loads(head)
    return data, payload


@dataclass(frozen=True)
class Answer:
    """A task's answer: ``index``, the message of the index job to send (with ``prepared``,
    the part of its work that needs no catalogue, done), or ``extraction`` (no records, or
    unchanged), or ``error`` (the verdict on what it raised), or ``lost`` (its process died:
    ``blamed`` when it was the task running, else it never started)."""

    task_id: int
    index: str | None = None
    prepared: PreparedIndex | None = None
    extraction: Extraction | None = None
    error: HarvestError | None = None
    lost: bool = False
    blamed: bool = False


def error_of(data: dict[str, Any]) -> HarvestError:
    """The error an answer's ``error`` part names, as the runner's verdict reads it."""
    message, reason = str(data["message"]), str(data["reason"])
    if data.get("retryable"):
        return RetryableError(message, reason=reason, retry_after=data.get("retry_after"))
    error = PermanentError(message, reason=reason)
    error.outcome = str(data.get("outcome") or error.outcome)
    return error


def _answer_of(raw: bytes) -> Answer:
    data, payload = _unframe(raw)
    task_id = int(data["id"])
    if "error" in data:
        return Answer(task_id, error=error_of(data["error"]))
    if "index" in data:
        # (the message, then the prepared work pickled: from our own process, not a stranger)
        size = int(data["index"])
        prepared = pickle.loads(payload[size:]) if len(payload) > size else None  # noqa: S301
        return Answer(task_id, index=payload[:size].decode("utf-8"), prepared=prepared)
    if "unchanged" in data:
        return Answer(task_id, extraction=Extraction(unchanged=str(data["unchanged"])))
    return Answer(task_id, extraction=Extraction(staged=decode_staged(payload)))


@dataclass
class _Child:
    """One process of the pool and the ids of its tasks not yet answered, oldest first."""

    process: subprocess.Popen[bytes]
    reader: threading.Thread | None = None
    tasks: deque[int] = field(default_factory=deque)
    ready: bool = False


class StagePool:
    """``processes`` processes reading documents for a harvest into ``out_dir``.

    :meth:`submit` sends a task to a process with room for it (:meth:`room`); :meth:`answers`
    returns what came back, each task once: answered, or lost with its process (which is
    replaced). ``wake`` is set whenever something comes back. Processes start in their own
    session: Ctrl-C in a terminal reaches the runner only, which stops them
    (:meth:`terminate`).
    """

    def __init__(
        self, processes: int, out_dir: Path, *, shacl: bool, wake: threading.Event
    ) -> None:
        self._out_dir = out_dir
        self._shacl = shacl
        self._wake = wake
        self._inbox: queue.SimpleQueue[tuple[_Child, bytes | None]] = queue.SimpleQueue()
        self._stillborn = 0
        self._children = [self._start() for _ in range(processes)]

    @property
    def broken(self) -> bool:
        """Whether the processes keep dying before they are ready (see ``_STILLBORN``)."""
        return self._stillborn >= _STILLBORN

    def room(self) -> int:
        """How many more tasks the processes can take now."""
        return sum(_DEPTH - len(child.tasks) for child in self._children)

    def in_flight(self) -> int:
        """Tasks sent and not yet answered."""
        return sum(len(child.tasks) for child in self._children)

    def pids(self) -> list[int]:
        """The process ids of the pool's processes (as now running)."""
        return [child.process.pid for child in self._children]

    def ready_pids(self) -> list[int]:
        """The process ids of the processes that have said they are ready for tasks."""
        return [child.process.pid for child in self._children if child.ready]

    def pid_of(self, task_id: int) -> int | None:
        """The process id of the process ``task_id`` was sent to (None once answered)."""
        return next((c.process.pid for c in self._children if task_id in c.tasks), None)

    def submit(self, task_id: int, task: bytes) -> None:
        """Send ``task`` (see :func:`task_message`) to the least busy process."""
        child = min(self._children, key=lambda c: len(c.tasks))
        child.tasks.append(task_id)
        stdin = child.process.stdin
        assert stdin is not None
        try:
            stdin.write(_HEADER.pack(len(task)) + task)
            stdin.flush()
        except OSError:  # it died: its end of stdout says so, and the task is lost with it
            pass

    def answers(self) -> Iterator[Answer]:
        """The answers come back since last asked, and the tasks lost with a process."""
        while True:
            try:
                child, raw = self._inbox.get_nowait()
            except queue.Empty:
                return
            if raw is None:
                yield from self._lost(child)
            else:
                if child.tasks:
                    child.tasks.popleft()
                yield _answer_of(raw)

    def _lost(self, child: _Child) -> Iterator[Answer]:
        """The tasks of ``child``, whose stdout ended: it died, or was told to stop."""
        try:
            child.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # (stdout closed, yet alive: not ours to keep)
            child.process.kill()
            child.process.wait()
        if child.process.stdin is not None:
            with contextlib.suppress(OSError):  # (a pipe to a dead process)
                child.process.stdin.close()
        if not child.ready:
            self._stillborn += 1
        if child in self._children:
            # The first task was running: it may be what killed it (counted as an attempt).
            # The others never started.
            for position, task_id in enumerate(child.tasks):
                yield Answer(task_id, lost=True, blamed=position == 0)
            child.tasks.clear()
            index = self._children.index(child)
            if not self.broken:
                self._children[index] = self._start()
            else:
                del self._children[index]

    def close(self) -> None:
        """Let every process finish and exit (its stdin closed), then wait for it."""
        for child in self._children:
            if child.process.stdin is not None:
                child.process.stdin.close()
        for child in self._children:
            try:
                child.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
            _join(child)
        self._children = []

    def terminate(self) -> None:
        """Stop every process now (a run interrupted: their tasks are dropped)."""
        children, self._children = self._children, []
        for child in children:
            child.process.kill()
        for child in children:
            child.process.wait()
            if child.process.stdin is not None:
                with contextlib.suppress(OSError):  # (a pipe to a dead process)
                    child.process.stdin.close()
            _join(child)

    def _start(self) -> _Child:
        package_root = str(Path(cdif_harvester.__file__).resolve().parent.parent)
        env = dict(os.environ)
        # (the package as this process imported it, wherever that was)
        env["PYTHONPATH"] = os.pathsep.join(
            part for part in (package_root, env.get("PYTHONPATH")) if part
        )
        process = subprocess.Popen(
            command(self._out_dir, shacl=self._shacl),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # (Ctrl-C in a terminal is the runner's to handle)
        )
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                _widen(pipe)
        child = _Child(process)
        child.reader = threading.Thread(
            target=self._read, args=(child,), name="cdif-pool-reader", daemon=True
        )
        child.reader.start()
        return child

    def _read(self, child: _Child) -> None:
        """Pass each answer of ``child`` to the runner; None when its stdout ends."""
        stdout = child.process.stdout
        assert stdout is not None
        with stdout:
            while (raw := _read_frame(stdout)) is not None:
                if not raw:  # (its imports done: it is no broken installation)
                    child.ready = True
                    continue
                self._inbox.put((child, raw))
                self._wake.set()
        self._inbox.put((child, None))
        self._wake.set()


def _join(child: _Child) -> None:
    """Wait for the reader of ``child``, which has exited (its stdout then closed)."""
    if child.reader is not None and child.reader is not threading.current_thread():
        child.reader.join(timeout=10)


def command(out_dir: Path, *, shacl: bool) -> list[str]:
    """The command line of a process reading documents for a harvest into ``out_dir``."""
    line = [sys.executable, "-m", "cdif_harvester.cli.processes", str(out_dir)]
    return [*line, "--shacl"] if shacl else line


#: What each pipe to and from a process holds (Linux; elsewhere the system's default): a
#: pipe's default 64 KiB holds two answers or eight tasks, and a full one stops the runner's
#: main loop in its write, or the process in its answer, until the other end reads.
PIPE_BYTES = 1 << 20


def _widen(pipe: IO[bytes]) -> None:
    """Let ``pipe`` hold :data:`PIPE_BYTES`, where the system allows it (an unprivileged
    process may be held to less by ``/proc/sys/fs/pipe-max-size``: the default is kept then)."""
    setting = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setting is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe.fileno(), setting, PIPE_BYTES)


def _read_frame(stream: IO[bytes]) -> bytes | None:
    """One length-prefixed frame from ``stream``; None at its end (or a frame cut short)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = stream.read(size)
    return body if len(body) == size else None


# -- the process's side ---------------------------------------------------------------------------


def _answer(wiring: Any, raw: bytes) -> bytes:
    """Read one task's documents; the answer's bytes."""
    data, payload = _unframe(raw)
    head = {"id": data["id"]}
    try:
        job = decode(payload, DocumentJob)
        held = data.get("held")
        # A job that carries its URL's state is compared with it here (the runner sends held
        # blocks only for one that does not: it reads no catalogue for the others).
        extraction = read_documents(
            wiring,
            job,
            held_blocks(carried_state(job))
            if held is None
            else HeldBlocks(tuple(held["blocks"]), tuple(held["sd_dates"])),
        )
        if extraction.staged is not None and extraction.staged.records:
            index_job, message = hand_over(wiring, job, extraction.staged)
            encoded = message.encode("utf-8")
            prepared = _prepared(wiring, index_job, extraction.staged)
            return _frame({**head, "index": len(encoded)}, encoded + prepared)
    except Exception as exc:  # noqa: BLE001 - every error goes back with its verdict
        return _frame({**head, "error": _error_data(exc)})
    if extraction.unchanged is not None:
        return _frame({**head, "unchanged": extraction.unchanged})
    assert extraction.staged is not None
    return _frame(head, encode_staged(extraction.staged))


def _prepared(wiring: Any, job: IndexJob, staged: StagedRecords) -> bytes:
    """The work of ``job`` (handing ``staged`` over) that needs no catalogue, done here and
    pickled (nothing when it fails: the runner's indexer then does it all, and meets the error
    itself). ``staged`` as made, not read back from the message: they are the same values."""
    try:
        prepared = prepare_index(wiring, job, staged)
        return pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - (see above)
        return b""


def _error_data(exc: Exception) -> dict[str, Any]:
    """What the runner needs of an error to decide as if it had been raised there."""
    error = verdict(exc)
    if error is not None:
        if not isinstance(exc, HarvestError):  # a bug: the traceback is the operator's
            logger.error("reading documents failed: %s", error, exc_info=exc)
        return {"message": str(error), "reason": error.reason, "outcome": error.outcome}
    return {
        "retryable": True,
        "message": str(exc),
        "reason": exc.reason if isinstance(exc, HarvestError) else type(exc).__name__,
        "retry_after": getattr(exc, "retry_after", None),
    }


def _serve(out_dir: Path, *, shacl: bool) -> None:
    """Answer the tasks read from stdin until it ends."""
    from cdif_harvester.adapters.local import (  # noqa: PLC0415 - the process's own
        DirectoryObjectStore,
        InProcessQueue,
        OfflineFetcher,
        SqliteCatalog,
        SystemClock,
    )
    from cdif_harvester.settings import Settings  # noqa: PLC0415
    from cdif_harvester.wiring import Wiring  # noqa: PLC0415

    # The answers have stdout to themselves: whatever else writes there goes to stderr.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the runner stops the pool itself)
    wiring = Wiring(
        store=DirectoryObjectStore(out_dir),
        # Never read (read_documents does not touch the catalogue); one in memory fills the slot.
        catalog=SqliteCatalog(Path(":memory:")),
        queue=InProcessQueue(),
        fetcher=OfflineFetcher(),
        clock=SystemClock(),
        settings=Settings(shacl=shacl),
    )
    # Tasks are read as they come, so that the runner never waits to send one.
    tasks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def receive() -> None:
        while (raw := _read_frame(sys.stdin.buffer)) is not None:
            tasks.put(raw)
        tasks.put(None)

    threading.Thread(target=receive, name="cdif-pool-tasks", daemon=True).start()
    answers.write(_HEADER.pack(0))  # ready: an empty frame
    answers.flush()
    while (raw := tasks.get()) is not None:
        answer = _answer(wiring, raw)
        answers.write(_HEADER.pack(len(answer)) + answer)
        answers.flush()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), shacl="--shacl" in sys.argv[2:])
