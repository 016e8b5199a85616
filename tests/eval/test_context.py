"""Utility within a context budget: the context, answer and evidence recall@C, answer presence, the floors."""

from __future__ import annotations

import numpy as np
import pytest

from memrefine_edge.core import Entry
from memrefine_edge.eval._context import (
    StoreText,
    answer_presence,
    answer_tokens,
    build_context,
    score_context,
    text_tokens,
)
from memrefine_edge.eval._floors import evict_floor
from memrefine_edge.eval._harness import recall_of, top_k
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder


def test_context_takes_whole_entries_in_rank_order_and_cuts_only_a_first_giant():
    sizes = [400, 300, 500, 100]
    assert build_context([0, 1, 2, 3], sizes, 1000) == [(0, 1.0), (1, 1.0)]  # 500 does not fit: stop there
    assert build_context([3, 1, 0, 2], sizes, 1000) == [(3, 1.0), (1, 1.0), (0, 1.0)]
    assert build_context([2, 0], sizes, 250) == [(2, 0.5)]  # alone larger than C: cut to C
    assert build_context([0, 2], sizes, 400) == [(0, 1.0)]
    assert build_context([], [], 1000) == []


def test_answer_recall_at_c_by_hand():
    contents = ["Caroline went to the LGBTQ support group on 7 May 2023.",  # 56 bytes
                "Melanie painted a sunrise over the lake last year.",
                "Caroline is researching adoption agencies."]
    store = StoreText.of(contents, [("D1:3",), ("D1:12",), ("D2:8",)])
    gold = [answer_tokens({"category": 2, "answer": "7 May 2023"}),
            answer_tokens({"category": 1, "answer": "Adoption agencies"}),
            answer_tokens({"category": 5, "answer": "Melanie"})]  # adversarial: not scored
    assert gold[0] == {"7", "may", "2023"} and gold[1] == {"adopt", "agenc"} and gold[2] == frozenset()
    orders = np.array([[0, 1, 2], [1, 0, 2], [2, 1, 0]])
    evidence = [frozenset({"D1:3"}), frozenset({"D2:8"}), frozenset({"D1:12"})]
    # C = 60 bytes: question 0 sees entry 0 whole (all 3 tokens); question 1 sees only entry 1 (0 of 2).
    small = score_context(store, orders, [2, 1, 5], evidence, gold, 60)
    assert small.answer_sum == {2: 1.0, 1: 0.0} and small.answer_n == {2: 1, 1: 1}
    # question 2 sees entry 2 only (entry 1 would pass 60 bytes): its evidence D1:12 is not shown
    assert small.evidence_sum == {2: 1.0, 1: 0.0, 5: 0.0} and small.evidence_n == {2: 1, 1: 1, 5: 1}
    # C = 30 bytes: every first entry is cut; "Caroline went to the LGBTQ su" holds none of "7 may 2023",
    # and the cut entry's evidence counts with the share of its bytes shown (30 / 56).
    cut = score_context(store, orders, [2, 1, 5], evidence, gold, 30)
    assert cut.answer_sum[2] == 0.0
    assert cut.evidence_sum[2] == pytest.approx(30 / len(contents[0].encode()))
    # C = 200: everything fits; each answerable question finds its whole answer.
    big = score_context(store, orders, [2, 1, 5], evidence, gold, 200)
    assert big.answer_sum == {2: 1.0, 1: 1.0}
    d = big.as_dict()
    assert d["answer_sum"] == 2.0 and d["answer_n"] == 2 and d["by_category"]["5"]["answer_n"] == 0


def test_answer_presence_is_about_the_store_not_the_retriever():
    store = StoreText.of(["Ana ran the Berlin marathon in 2019.", "Ben adopted a cat named Pixel."], [(), ()])
    gold = [text_tokens("Berlin marathon"), text_tokens("a dog named Rex"), frozenset()]
    assert answer_presence(store, [1, 4, 5], gold) == {
        "present": 1, "n": 2, "by_category": {"1": {"present": 1, "n": 1}, "4": {"present": 0, "n": 1}}}


def test_packing_the_store_into_one_entry_raises_recall_at_10_but_not_recall_at_c(tmp_path):
    """A method that concatenated the whole store into one entry would find every evidence id in its
    top 10 by provenance; within a context of C bytes it must not look better than the store it packed."""
    words = ("tea coffee hiking paris guitar piano dog cat yoga novel sister birthday concert garden beach "
             "museum school recipe soup violin").split()
    entries = [Entry(id=f"e{i}", content=f"Ana mentioned {words[i % 20]} and {words[(i * 7) % 20]} on day {i}.",
                     provenance=(f"D1:{i}",)) for i in range(150)]
    questions = [f"What did Ana say about {words[i % 20]}?" for i in range(20)]
    evidence = [frozenset({f"D1:{j}" for j in range(150) if j % 20 == i % 20 or (j * 7) % 20 == i % 20})
                for i in range(20)]
    gold = [text_tokens(f"{words[i % 20]} day {i}") for i in range(20)]
    enc = HashEncoder()
    q_emb = enc.embed(questions)

    def measure(items: list[Entry]) -> tuple[float, float, float]:
        with MemoryStore(tmp_path / f"s{len(items)}.db") as store:
            store.add_many(items)
            store.ensure_embeddings(enc)
            ids, matrix = store.embeddings(model_id=enc.model_id)
            live = {e.id: e for e in store.entries()}
        prov = [frozenset(live[i].provenance) for i in ids]
        order = top_k(matrix, q_emb, len(ids))
        at10 = np.mean([recall_of(ev, [prov[i] for i in order[q, :10]]) for q, ev in enumerate(evidence)])
        text = StoreText.of([live[i].content for i in ids], prov)
        s = score_context(text, order, [1] * 20, evidence, gold, 1000)
        return float(at10), s.as_dict()["evidence_sum"] / 20, s.as_dict()["answer_sum"] / 20

    base = measure(entries)
    packed = measure([Entry(id="all", content=" ".join(e.content for e in entries),
                            provenance=tuple(p for e in entries for p in e.provenance))])
    assert packed[0] == 1.0 > base[0]  # recall@10 by provenance rewards the packing
    assert packed[1] < base[1] and packed[2] <= base[2]  # utility within 1,000 bytes does not rise


@pytest.mark.parametrize("name", ["fifo", "random"])
def test_floors_remove_entries_in_their_order_until_the_budget_holds(tmp_path, name):
    with MemoryStore(tmp_path / "f.db") as store:
        store.add_many(Entry(id=f"e{i:02d}", content=f"note number {i} " * 3) for i in range(30))
        target = store.json_bytes() // 2
        report = evict_floor(store, name, target_bytes=target, seed=3)
        left = store.ids()
        assert report["budget_met"] and store.json_bytes() <= target and report["actions"]["evict"] == 30 - len(left)
        if name == "fifo":
            assert left == [f"e{i:02d}" for i in range(30 - len(left), 30)]  # the newest survive
    with MemoryStore(tmp_path / "g.db") as again:  # the same seed removes the same entries
        again.add_many(Entry(id=f"e{i:02d}", content=f"note number {i} " * 3) for i in range(30))
        evict_floor(again, name, target_bytes=target, seed=3)
        assert again.ids() == left
    with pytest.raises(ValueError, match="unknown floor"):
        evict_floor(again, "lifo", target_bytes=1)
