"""Supersession: a newer entry that updates the same attribute of the same subject.

The judge keeps the history: it never deletes the older entry while that entry holds a value the newer
one does not write (a place, a number, a date, a name, or an ordinary word in the same statement), and a
merge of the two keeps both values, the earlier entry's first, with both entries' timestamps. Deleting
the older entry is allowed only when the newer one writes its value too ("Moved from Lisbon to Porto"
beside "Lives in Lisbon"). A correction that negates the older value ("Anya, not Ana") keeps it too: the
negation check refuses the delete, and the pair is merged or kept.
"""

from __future__ import annotations

import pytest

from memrefine_edge.core import Decision, Entry
from memrefine_edge.engine import Compressor, PipelineConfig, build
from memrefine_edge.judging import GuardedJudge, concat_merge, default_judge
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import AlwaysJudge, FakeBackends
from memrefine_edge.text import lost_facts

#: (older entry, newer entry, the older value, the newer value)
UPDATES = [
    ("Lives in Lisbon", "Lives in Porto now", "Lisbon", "Porto"),
    ("Takes 5 mg of ramipril every morning", "Now takes 10 mg of ramipril every morning", "5 mg", "10 mg"),
    ("Prefers oat milk in her coffee", "Prefers soy milk in her coffee", "oat", "soy"),
    ("Takes the bus to work every day", "Takes the train to work every day", "bus", "train"),
    ("Her manager is David Cho", "Her manager is David Chen", "Cho", "Chen"),
    ("Yoga class is on Wednesdays at 18:00", "Yoga class moved to Thursdays at 18:00", "Wednesdays", "Thursdays"),
    ("Nadia: the dog is called Biscuit.", "Nadia: the dog is called Pickle now.", "Biscuit", "Pickle"),
    ("Rent is 900 euros a month", "Rent went up to 980 euros a month", "900", "980"),
]


@pytest.mark.parametrize("older, newer, old_value, new_value", UPDATES)
def test_an_update_never_deletes_the_entry_with_the_older_value(older, newer, old_value, new_value):
    judge = default_judge()
    for a, b in ((older, newer), (newer, older)):
        for similarity in (0.6, 0.8, 0.95, 0.99):
            d = judge.decide(a, b, similarity)
            if d.action == "delete":
                gone = a if d.target == "a" else b
                assert gone != older, (a, b, similarity, d)
            if d.action == "merge":
                merged = concat_merge(a, b).content
                assert old_value in merged and new_value in merged, merged


@pytest.mark.parametrize("older, newer, old_value, new_value", UPDATES)
def test_the_fact_checks_name_the_older_value_a_delete_would_lose(older, newer, old_value, new_value):
    lost = " ".join(lost_facts(older, newer, min_word_cover=0.0))
    assert old_value.split()[0].lower() in lost.lower(), lost


@pytest.mark.parametrize("older, newer", [
    ("Lives in Lisbon", "Moved from Lisbon to Porto on 1 September 2024"),
    ("Prefers oat milk", "Switched from oat milk to soy milk in April 2024"),
    ("Works as a backend engineer", "Was promoted from backend engineer to senior backend engineer"),
])
def test_a_newer_entry_that_writes_the_older_value_states_it(older, newer):
    # The older entry says nothing the newer does not: deleting it loses no fact (the labels' rule 2).
    assert lost_facts(older, newer, min_word_cover=0.0) == []


class _Merging(FakeBackends):
    """The default pipeline without models, whose judge merges every pair it is asked about."""

    def judge(self, config: PipelineConfig):
        return GuardedJudge(AlwaysJudge(Decision("merge", None)), min_word_cover=0.0)


def test_a_merged_update_keeps_both_values_in_order_with_both_dates(tmp_path):
    pipeline = build(PipelineConfig(), backends=_Merging())
    older = Entry(id="home-1", content="Lives in Lisbon, in a flat in Alfama", timestamps=("2023-02-01T10:00:00",))
    newer = Entry(id="home-2", content="Lives in Porto now, near the river", timestamps=("2024-09-02T09:30:00",))
    with MemoryStore(tmp_path / "m.db") as store:
        store.add_many([older, newer])
        Compressor(store, encoder=pipeline.encoder, method=pipeline.method, merger=pipeline.merger,
                   vacuum=False, mode="paper").run(budget=0.5)
        entries = list(store.entries())
    assert len(entries) == 1, entries
    merged = entries[0]
    assert merged.content.index("Lisbon") < merged.content.index("Porto"), merged.content
    assert merged.timestamps == ("2023-02-01T10:00:00", "2024-09-02T09:30:00")
    assert merged.metadata["merged_from"] == ["home-1", "home-2"]
