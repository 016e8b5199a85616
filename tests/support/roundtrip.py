"""Generated stores and runs for the export and change-set tests, and fake memory clients (mem0, A-MEM)."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from memrefine_edge.core import BudgetError, Decision, Entry
from memrefine_edge.engine import Compressor
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore, export_file
from memrefine_edge.testing import HashEncoder

from .fakes import ConcatMerger

WORDS = "tea hiking paris guitar dog yoga novel sister concert garden beach museum job soup cello".split()
STAMPS = ("2024-01-01T10:00:00Z", "2024-02-02T11:00:00Z", "2024-03-03T12:00:00Z", "2024-04-04T13:00:00Z")


@st.composite
def entries(draw, min_size: int = 3, max_size: int = 12) -> list[Entry]:
    """Entries with every field the formats hold: near-duplicate texts (so pairs come up), keywords, links to
    earlier entries, zero to three timestamps, metadata with mem0 and A-MEM keys and others, provenance."""
    n = draw(st.integers(min_size, max_size))
    out: list[Entry] = []
    for i in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=4))
        if out and draw(st.booleans()):  # a near-duplicate of an earlier entry
            words = out[draw(st.integers(0, len(out) - 1))].content.split()[1:4] + words[:1]
        meta: dict[str, Any] = {}
        for key, values in (("hash", [f"h{i}"]), ("user_id", ["alex", "sam"]), ("context", ["chat", "work"]),
                            ("tags", [["a"], ["b", "c"]]), ("source", ["import"]), ("confidence", [0.5, 1])):
            if draw(st.booleans()):
                meta[key] = draw(st.sampled_from(values))
        out.append(Entry(
            id=f"u{i}" if i % 3 else f"id-{i}",
            content=("Ana: " if i % 2 else "Ben: ") + " ".join(words) + ("\n  second line" if i % 5 == 4 else ""),
            keywords=tuple(draw(st.lists(st.sampled_from(WORDS), max_size=2, unique=True))),
            links=tuple(dict.fromkeys(draw(st.lists(st.sampled_from([e.id for e in out]), max_size=2)))) if out else (),
            timestamps=tuple(draw(st.lists(st.sampled_from(STAMPS), max_size=3, unique=True))),
            metadata=meta,
            provenance=tuple(draw(st.lists(st.sampled_from(["D1:1", "D1:2", "D2:1"]), max_size=2, unique=True))),
        ))
    return out


class DrawnMethod(Method):
    """Replays a drawn list of decisions (``delete_a``, ``delete_b``, ``merge``, ``preserve``); then preserves."""

    name = "drawn"

    def __init__(self, script: Sequence[str]) -> None:
        self.script = list(script)

    def decide(self, pair: PairContext) -> Decision:
        what = self.script.pop(0) if self.script else "preserve"
        if what == "merge":
            return Decision("merge", None, merge_instruction="keep both", reason="drawn merge", source="llm")
        if what.startswith("delete"):
            return Decision("delete", what[-1], reason=f"drawn {what}", source="rule")  # type: ignore[arg-type]
        return Decision("preserve", None, reason="drawn preserve", source="rule")


@dataclass
class RunPlan:
    """One run of a generated history: its decisions, budget, mode; ``undo``: undone right after."""

    script: list[str]
    budget: float
    strict: bool
    undo: bool = False


runs = st.lists(st.builds(
    RunPlan,
    script=st.lists(st.sampled_from(["delete_a", "delete_b", "merge", "merge", "preserve"]), min_size=1, max_size=12),
    budget=st.floats(0.2, 0.9),
    strict=st.booleans(),
    undo=st.booleans(),
), min_size=1, max_size=3)


def export_records(store: MemoryStore, fmt: str) -> Any:
    """What ``export_file`` writes in ``fmt``, parsed (records for jsonl, mem0 and amem; the text for text)."""
    out = io.StringIO()
    export_file(store, out, format=fmt)
    text = out.getvalue()
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if fmt == "mem0":
        return json.loads(text)["results"]
    if fmt == "amem":
        return list(json.loads(text).values())
    return text


@dataclass
class History:
    """The runs made (not undone), with the store's export in every format before and after each."""

    runs: list[str] = field(default_factory=list)
    before: dict[str, dict[str, Any]] = field(default_factory=dict)  # run -> format -> records
    after: dict[str, dict[str, Any]] = field(default_factory=dict)
    undone: list[str] = field(default_factory=list)


FORMATS = ("jsonl", "mem0", "amem")


def play(store: MemoryStore, plans: Sequence[RunPlan]) -> History:
    """Run each plan on ``store`` (skipping a strict budget below one entry), undoing those marked ``undo``."""
    history = History()
    for plan in plans:
        comp = Compressor(store, encoder=HashEncoder(), method=DrawnMethod(plan.script), merger=ConcatMerger(), k=4,
                          mode="strict" if plan.strict else "paper", vacuum=False)
        try:
            comp.target_bytes(budget=plan.budget)
        except BudgetError:
            continue
        before = {fmt: export_records(store, fmt) for fmt in FORMATS}
        report = comp.run(budget=plan.budget)
        if report.run_id is None:
            continue
        if plan.undo:
            store.journal.undo(report.run_id)
            history.undone.append(report.run_id)
            continue
        history.runs.append(report.run_id)
        history.before[report.run_id] = before
        history.after[report.run_id] = {fmt: export_records(store, fmt) for fmt in FORMATS}
    return history


def by_id(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in records}


# --- fake memory clients ------------------------------------------------------------------------


class FakeMem0:
    """The public calls of a mem0 OSS ``Memory`` the apply script uses, over a ``get_all()`` result.

    ``update`` behaves as mem0's: a new hash (MD5 of the text), created_at kept, updated_at set now;
    ``metadata`` is taken (merged into the old) only if ``takes_metadata`` (newer mem0 versions).
    """

    def __init__(self, results: Sequence[dict[str, Any]], *, takes_metadata: bool = True) -> None:
        self.memories = {r["id"]: json.loads(json.dumps(r)) for r in results}
        self.calls: list[tuple[str, str]] = []
        if not takes_metadata:
            self.update = self._update_text_only  # type: ignore[method-assign]

    def get(self, memory_id: str) -> dict[str, Any] | None:
        memory = self.memories.get(memory_id)
        return json.loads(json.dumps(memory)) if memory is not None else None

    def get_all(self, **filters: Any) -> dict[str, Any]:
        return {"results": [json.loads(json.dumps(m)) for m in self.memories.values()]}

    def delete(self, memory_id: str) -> dict[str, str]:
        self.calls.append(("delete", memory_id))
        if memory_id not in self.memories:
            raise ValueError(f"Memory with id {memory_id} not found")
        del self.memories[memory_id]
        return {"message": "Memory deleted successfully!"}

    def update(self, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None) -> dict:
        self.calls.append(("update", memory_id))
        memory = self.memories[memory_id]
        memory["memory"] = text
        memory["hash"] = hashlib.md5(str(text).encode()).hexdigest()
        memory["updated_at"] = "2099-01-01T00:00:00Z"
        if metadata is not None:
            memory["metadata"] = {**(memory.get("metadata") or {}), **metadata}
        return {"message": "Memory updated successfully!"}

    def _update_text_only(self, memory_id: str, data: str) -> dict:
        return FakeMem0.update(self, memory_id, data)


@dataclass
class FakeNote:
    id: str
    content: str
    keywords: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    timestamp: str | None = None
    last_accessed: str | None = None
    context: str | None = None
    tags: list[str] = field(default_factory=list)
    category: str | None = None
    retrieval_count: int = 0
    evolution_history: list[Any] = field(default_factory=list)


class FakeAMem:
    """The public calls of an A-MEM ``AgenticMemorySystem`` the apply script uses: read, update, delete."""

    def __init__(self, notes: Sequence[dict[str, Any]]) -> None:
        self.memories = {n["id"]: FakeNote(**n) for n in notes}
        self.calls: list[tuple[str, str]] = []

    def read(self, memory_id: str) -> FakeNote | None:
        return self.memories.get(memory_id)

    def update(self, memory_id: str, **fields: Any) -> bool:
        self.calls.append(("update", memory_id))
        if memory_id not in self.memories:
            return False
        note = self.memories[memory_id]
        for key, value in fields.items():
            if hasattr(note, key):
                setattr(note, key, value)
        return True

    def delete(self, memory_id: str) -> bool:
        self.calls.append(("delete", memory_id))
        return self.memories.pop(memory_id, None) is not None
