"""The deferred phase: the deletes a method put off, taken when the candidate pairs run out.

A method may preserve a pair for now with ``source="deferred"`` (the memrefine
method does so with ``defer_last_copies`` when the judge's delete would take the
store's last copy of a specific word, :mod:`memrefine_edge.text._lastcopy`). When the
candidate pairs run out with the store still above budget, in either mode, the
run (:class:`~memrefine_edge.engine._compressor.Compressor`) takes those deletes after
all: the *deferred phase* reads the deferred pairs of every run on the store
(kept in the journal, :meth:`RunJournal.deferrals`) in the order they were
decided and, for each whose two entries are both still live and the run's
own, asks the method again (:meth:`Method.deferred`) and applies the delete
it returns as a decision of its own, until the budget holds. A run that
meets its budget with the candidate pairs never takes a deferred delete.
The phase depends only on the journal and the live entries, so a run
resumed during it (or before it) takes the same deletes: a pair whose
delete was already applied has an entry gone and is skipped.
"""

from __future__ import annotations

import time

from memrefine_edge.core import ConfigurationError, EntryNotFoundError
from memrefine_edge.methods import PairContext

from ._run import PhaseResult, RunState

__all__ = ["take_deferred"]


def take_deferred(run: RunState) -> PhaseResult:
    """The deferred phase (see the module docstring): take deferred deletes until the budget holds.

    Each delete the method confirms is applied by the run's one decision path
    (:meth:`~memrefine_edge.engine._apply.DecisionPath.apply`). Stops early (the
    run stays resumable) at ``max_decisions``.
    """
    store, clock, path, since = run.store, run.clock, run.path, run.done
    # Every run's deferrals whose entries are live: a chained or repeated compression (or an
    # upkeep pass) may need the bytes an earlier run deferred.
    pending = store.journal.deferrals(live=True)
    stopped = None
    with run.phase():
        for a_id, b_id, sim in pending:
            if not run.over():
                break
            stopped = run.capped()
            if stopped:
                break
            if a_id not in store or b_id not in store:
                continue  # an entry is gone: this delete (or another decision) took it
            if a_id in run.outsiders.sizes or b_id in run.outsiders.sizes:
                continue  # added by another writer during the run (the budget check updated the list)
            if run.protected((a_id, b_id)):
                continue  # strict mode: the pair holds the last entry that fits the budget alone
            try:
                a, b = store.get(a_id), store.get(b_id)
                t = time.perf_counter()
                decision = path.method.deferred(PairContext(a=a, b=b, similarity=sim, store=store))
                latency = (time.perf_counter() - t) * 1000
                clock["judge"] += latency / 1000
                if decision is None:
                    continue
                if decision.action != "delete":
                    raise ConfigurationError(f"method {path.method.name!r}: deferred() returned a "
                                             f"{decision.action}; it may return a delete or None")
                action, source = path.apply(run.step, (a_id, b_id, sim), a, b, decision, latency_ms=latency)
            except EntryNotFoundError:
                continue  # removed by another connection meanwhile: nothing written
            run.deferred_taken += 1
            run.count(action, source)
    return run.result(since, stopped)
