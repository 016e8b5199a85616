"""The upkeep worker: a thread with its own connection that embeds new entries and runs the passes.

Why a thread and not a process: the worker needs the user's encoder, method and merger
objects (a loaded model, a judge with its caches), which a thread shares as they are; a
process would load every model a second time (memory a device does not have) and could
only be given objects that can be pickled or rebuilt. Its own connection keeps its
transactions apart from the caller's: the caller's readers see only committed states,
and an add never runs inside a pass's transaction.

Two things keep adds fast while it works. The caller's adds never wait behind a group of
decisions: the worker commits every decision on its own. And they do not share the
interpreter or the cores with it: while an add or a search runs on the caller's store the worker
parks at its next step (:meth:`UpkeepWorker.step_done`, after every committed decision and
embedding batch) or its next pause point inside a long computation (:meth:`UpkeepWorker.pause`:
between the tiles of a neighbour-list build, blocks of rescanned rows, blocks of the entries
eviction reads), so neither is slowed by a thread that competes for them.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memrefine_edge.core import CompressionReport, EntryNotFoundError, RunLockedError
from memrefine_edge.store import MemoryStore

if TYPE_CHECKING:  # pragma: no cover
    from ._compressor import Compressor

__all__ = ["Stopped", "UpkeepHost", "UpkeepWorker"]

#: Texts embedded per batch (each batch commits, then the worker checks for adds and a stop).
EMBED_BATCH = 32
#: How long the worker waits before it tries again when another compression holds the store (s).
LOCK_RETRY_S = (0.05, 2.0)
#: How often an idle worker looks whether another connection changed the store (seconds).
POLL_S = 1.0
#: The write-ahead log size (bytes) above which the worker copies it back into the file.
WAL_CHECKPOINT_BYTES = 1 << 20


class UpkeepHost(Protocol):
    """What a worker uses of its :class:`~memrefine_edge.engine._upkeep.Upkeep` (which imports this module)."""

    compressor: Compressor
    reports: list[CompressionReport]
    blocked_by: str | None
    error: Exception | None

    def watermarks(self, store: MemoryStore) -> tuple[int, int] | None: ...

    def attempt(self, compressor: Compressor, low: int) -> CompressionReport | RunLockedError | None: ...

    def failed(self, exc: Exception) -> None: ...

    def crashed(self, exc: BaseException) -> None: ...


class Stopped(BaseException):
    """Raised inside the worker to stop it at a step (close); a BaseException, so no error handler takes it."""


class UpkeepWorker(threading.Thread):
    """One worker thread of an :class:`~memrefine_edge.engine._upkeep.Upkeep` (see the module docstring).

    The fields below are read and written under the upkeep's condition.
    """

    def __init__(self, upkeep: UpkeepHost, *, cond: threading.Condition, resume: bool) -> None:
        super().__init__(name="memrefine-upkeep", daemon=True)
        self.upkeep = upkeep
        #: The upkeep's condition: guards the fields below, notified at every change of them and every commit.
        self.cond = cond
        host = upkeep.compressor.store
        self.path = Path(host.path)
        self.options: dict[str, Any] = {
            "busy_timeout_ms": int(host.pragma("busy_timeout")),
            "max_file_bytes": host.max_file_bytes,
            "synchronous": "FULL" if int(host.pragma("synchronous")) >= 2 else "NORMAL",
        }
        #: Work asked for (an add, a start) and not yet taken up.
        self.wanted = True
        #: Working on it (embedding, a pass, waiting for another compression's lock).
        self.busy = False
        #: Waiting for another compression to release the store: an add does not wait for that.
        self.locked_out = False
        #: Adds and searches in progress on the caller's store: the worker parks at its next step meanwhile.
        self.caller_busy = 0
        #: Set by close(): the worker stops at its next step.
        self.stopping = False
        #: The error that ended this thread outside a pass (the next add starts a new one), or None.
        self.crashed: BaseException | None = None
        #: The sizes adds beyond the lag wait for (one per waiting add): the worker wakes them.
        self.watch: list[int] = []
        #: Adds waiting beyond the lag, from their first wait to their return: the pass hurries meanwhile.
        self.waiting = 0
        self._store: MemoryStore | None = None  # the worker's own connection, while it runs
        self._resume = resume  # look for an interrupted pass at the first wake-up
        self._embedded_upto = -1  # the highest insertion number embedded (-1: not checked yet)

    # --- for the caller's thread -------------------------------------------------------------

    def can_help(self) -> bool:
        """Whether an add beyond the lag should wait for this worker (under the condition)."""
        if not self.is_alive() or self.stopping or self.locked_out or not (self.wanted or self.busy):
            return False
        up = self.upkeep
        if up.blocked_by is not None or up.error is not None:
            return False
        # A pass that could not meet its budget (paper mode, no candidate left): waiting would only block.
        return not (up.reports and not up.reports[-1].budget_met)

    # --- the thread ----------------------------------------------------------------------------

    def run(self) -> None:
        store: MemoryStore | None = None
        try:
            store = self._store = MemoryStore(self.path, create=False, **self.options)
            comp = self._compressor(store)
            seen = -1
            while True:
                with self.cond:
                    while not self.wanted and not self.stopping:
                        self.cond.wait(POLL_S)
                        # Adds of other connections (another process) wake it too, within POLL_S.
                        if not self.wanted and store.data_version() != seen:
                            self.wanted = True
                    if self.stopping:
                        return
                    self.wanted = False
                    self.busy = True
                    seen = store.data_version()
                try:
                    self._work(store, comp)
                finally:
                    with self.cond:
                        self.busy = self.locked_out = False
                        self.cond.notify_all()
                self._checkpoint_log(store)
        except Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - the thread ends; the next add starts another
            with self.cond:
                self.crashed = exc
                self.wanted = True  # its work is not done: the next add or wait_idle starts a new worker
            self.upkeep.crashed(exc)
        finally:
            if store is not None:
                self._store = None
                try:
                    store.close()
                except Exception:  # noqa: BLE001 - closing must not hide why the thread ended
                    pass
            with self.cond:
                self.busy = False
                self.cond.notify_all()

    def step_done(self) -> None:
        """A step of the worker is committed: wake the adds waiting for the size once it is down to what
        they wait for, park while an add runs, stop if asked (the pass stays resumable)."""
        with self.cond:
            # Checked here, not by the waiting adds at every step: waking them thousands of times a pass
            # would hand the interpreter lock back and forth, and slow the pass several times over.
            if self.watch and self._store is not None and \
                    self._store.running_size(self.upkeep.compressor.metric) <= max(self.watch):
                self.cond.notify_all()
            self.pause()

    def pause(self) -> None:
        """Between blocks of a long computation of a pass (no decision pending): park while an add or a
        search runs on the caller's store, so it has the cores; stop if asked (the pass stays resumable).
        The upkeep's condition is reentrant: :meth:`step_done` parks here too, holding it."""
        with self.cond:
            while self.caller_busy and not self.stopping:
                self.cond.wait()
            if self.stopping:
                raise Stopped

    def _compressor(self, store: MemoryStore) -> Compressor:
        """The upkeep's compressor, on the worker's connection: every decision commits on its own, no
        VACUUM at a pass's end (it would hold every add for the time it rewrites the file), ``hurry``
        while an add waits beyond the lag, :meth:`pause` inside long computations, and :meth:`step_done`
        after every commit (the compressor calls ``progress`` only after a commit)."""
        comp = copy.copy(self.upkeep.compressor)
        comp.store = store
        comp.commit_window_s = 0.0
        comp.vacuum = False
        # An add waits beyond the lag: the pass evicts now and judges its remaining pairs next time.
        comp.hurry = lambda: self.waiting > 0
        comp.pause = self.pause
        progress, embed_progress = comp.progress, comp.embed_progress

        def on_progress(p: Any) -> None:
            if progress is not None:
                progress(p)
            self.step_done()

        def on_embed(done: int, total: int) -> None:
            if embed_progress is not None:
                embed_progress(done, total)
            self.step_done()

        comp.progress, comp.embed_progress = on_progress, on_embed
        return comp

    def _work(self, store: MemoryStore, comp: Compressor) -> None:
        """Embed what was added, then pass after pass while the store is above its high watermark; an error
        is kept and said like a pass's (the next add tries again)."""
        for step in (self._embed_new, self._passes):
            try:
                step(store, comp)
            except Stopped:
                raise
            except Exception as exc:  # noqa: BLE001 - a budget recorded unreadably, a model that fails, ...
                self.upkeep.failed(exc)

    def _passes(self, store: MemoryStore, comp: Compressor) -> None:
        """Pass after pass while the store is above its high watermark (and, at a start, an interrupted one)."""
        up, resume = self.upkeep, self._resume
        self._resume = False
        delay = LOCK_RETRY_S[0]
        while True:
            marks = up.watermarks(store)
            if marks is None:
                return
            over = store.running_size(comp.metric) > marks[0]
            # At a start, an interrupted pass is finished even below the watermark (it holds the run journal).
            if not over and not (resume and store.journal.unfinished_run() is not None):
                return
            outcome = up.attempt(comp, marks[1])
            if isinstance(outcome, RunLockedError):  # another compression holds the store: try again shortly
                with self.cond:
                    self.locked_out = True
                    self.cond.notify_all()
                    if not self.stopping:
                        self.cond.wait(delay)
                    if self.stopping:
                        raise Stopped
                    self.locked_out = False
                delay = min(delay * 2, LOCK_RETRY_S[1])
                continue
            resume = False
            if outcome is None or outcome.run_id is None or not outcome.budget_met:
                return  # skipped, failed, nothing to do, or it cannot do better: the next add tries again
            # Met: entries added during the pass may still leave the store above the watermark.

    def _embed_new(self, store: MemoryStore, comp: Compressor) -> None:
        """Embed the entries added since the last look (every missing one, the first time)."""
        encoder = comp.encoder
        top = store.max_seq()  # read first: an entry added meanwhile is embedded now or next time, never skipped
        if self._embedded_upto < 0:
            store.ensure_embeddings(encoder, batch_size=EMBED_BATCH, progress=lambda done, total: self.step_done())
            self._embedded_upto = top
            return
        new = list(store.sizes_after(self._embedded_upto))
        for start in range(0, len(new), EMBED_BATCH):
            todo = []
            for entry_id in new[start:start + EMBED_BATCH]:
                try:
                    todo.append(store.get(entry_id))
                except EntryNotFoundError:  # removed since (another connection's pass): nothing to embed
                    continue
            if todo:
                vectors = encoder.embed([e.content for e in todo])
                with store.atomic():
                    for entry, vector in zip(todo, vectors, strict=True):
                        if entry.id in store:  # a pass of another connection may have taken it since
                            store.set_embedding(entry.id, vector, encoder.model_id)
            self.step_done()
        self._embedded_upto = max(self._embedded_upto, top)

    def _checkpoint_log(self, store: MemoryStore) -> None:
        """Copy the write-ahead log back into the file when it has grown (the caller's adds never do)."""
        try:
            if Path(f"{self.path}-wal").stat().st_size > WAL_CHECKPOINT_BYTES:
                store.pragma("wal_checkpoint")
        except Exception:  # noqa: BLE001 - best effort: busy, or no log file
            pass
