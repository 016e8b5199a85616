"""The merge guard: facts of both entries must survive; repair, fall back, or raise."""

from __future__ import annotations

import json

import pytest

from memrefine_edge.core import MergeOutputError
from memrefine_edge.judging import GuardedMerger, MergedEntry, concat_merge
from memrefine_edge.judging._merger import default_keywords, parse_merged
from memrefine_edge.testing import FakeMerger

A = "Joanna finished her first screenplay last Friday."
B = "Joanna: Thanks, Nate! I plan to send the screenplay to a film festival in Austin."


def test_merged_entry_rejects_empty_content():
    with pytest.raises(ValueError):
        MergedEntry("  ")


def test_good_merge_passes_unchanged():
    good = "Joanna finished her first screenplay last Friday and plans to send it to a film festival in Austin."
    m = GuardedMerger(FakeMerger([good]))
    out = m.merge(A, B, "keep both")
    assert out.content == good and out.source == "llm"


def test_fact_losing_merge_is_repaired():
    m = GuardedMerger(FakeMerger(["Joanna finished her first screenplay last Friday."]))
    out = m.merge(A, B, "keep both")
    assert out.source == "repair"
    assert "Austin" in out.content and "last Friday" in out.content
    assert m.stats["repairs"] == 1


def test_invented_facts_fall_back_to_concat():
    m = GuardedMerger(FakeMerger(["Joanna finished a screenplay in 1999 with Bob in Austin for a festival."]))
    out = m.merge(A, B, "keep both")
    assert out.source == "concat" and "1999" not in out.content


def test_invalid_output_twice_then_concat_or_raise():
    err = MergeOutputError("bad", raw="junk")
    m = GuardedMerger(FakeMerger([err, err]))
    out = m.merge(A, B, "")
    assert out.source == "concat" and m.stats["invalid_outputs"] == 2 and m.stats["fallbacks"] == 1
    strict = GuardedMerger(FakeMerger([err, err]), fallback="raise")
    with pytest.raises(MergeOutputError):
        strict.merge(A, B, "")


def test_concat_merge_drops_filler_and_keeps_speakers():
    out = concat_merge(B, "Joanna: Bye! The festival is in May.")
    assert "Thanks" not in out.content and "Bye" not in out.content
    assert out.content.startswith("Joanna: ") and out.content.count("Joanna:") == 1
    assert "May" in out.content and "Austin" in out.content


@pytest.mark.parametrize("a, b, kept", [
    # Sentences the learned small-talk classifier would drop state facts: the merge keeps them.
    ("Ben: Haha I never say no to pie.", "Ben: Haha. By the way, I finished my exams. All passed.", "All passed."),
    ("Yannick, the carpenter, will redo the staircase in June.", "Staircase done. Yannick charged 4,200 €.",
     "Staircase done."),
    ("Mum's podiatry check on 30 July at 11:00, she's had some numbness in her feet.",
     "Podiatrist: early neuropathy in both feet. Mum must not walk barefoot, even at home.",
     "early neuropathy in both feet"),
])
def test_concat_merge_keeps_what_only_the_classifier_calls_small_talk(a, b, kept):
    from memrefine_edge.text import fact_sentences

    merged = concat_merge(a, b).content
    assert kept in merged
    assert not any(kept in s for s in fact_sentences(b))  # the classifier's call, which the merge does not take


@pytest.mark.parametrize("a, b, kept, dropped", [
    # The word lists find no fact word in these sentences, but they state something: the merge keeps them.
    ("Nikolai asked for gift ideas for Tamar.", "On 9 November Nikolai took Tamar to a concert. She loved both.",
     ["She loved both."], []),
    ("Joost: Noor was born last night at 23:52, 3.4 kg. Everyone is fine.", "Joost: Noor turned one today!",
     ["Everyone is fine."], []),
    ("Hyun: Tell Dirk he is on probation.", "Hyun: Jae-won PASSED! Anneke: Fantastic! Tell him Dirk is proud.",
     ["Jae-won PASSED!"], ["Fantastic"]),
    ("Anneke: Happy Easter, Hyun! The girls laid eleven eggs.", "Hyun: Third place for the onions!!",
     ["Happy Easter, Hyun!"], []),
    # Greetings, thanks, laughter and reactions go.
    ("Melanie: Thanks so much! Take care! I painted a lake.", "Melanie: Haha. That sounds amazing! Good luck! I hiked.",
     ["I painted a lake.", "I hiked."], ["Thanks", "Take care", "Haha", "sounds amazing", "Good luck"]),
])
def test_concat_merge_drops_only_greetings_thanks_and_reactions(a, b, kept, dropped):
    merged = concat_merge(a, b).content
    assert all(k in merged for k in kept) and not any(d in merged for d in dropped)


def test_concat_merge_skips_a_covered_entry():
    out = concat_merge("Tim visited London in 2019 with Ana.", "Tim visited London in 2019.")
    assert out.content == "Tim visited London in 2019 with Ana."


def test_rule_only_merger():
    out = GuardedMerger(None).merge(A, B, "")
    assert out.source == "concat" and "Austin" in out.content


def test_parse_merged():
    m = parse_merged('{"content": "Tim ran in Rome.", "keywords": ["Tim", "Rome", "Tim", 3]}')
    assert m.content == "Tim ran in Rome." and m.keywords == ("Tim", "Rome", "3")
    for raw in ("", "{}", '{"content": ""}', "{bad"):
        with pytest.raises(MergeOutputError):
            parse_merged(raw)


def test_default_keywords_use_written_words():
    kws = default_keywords("Tim writes for an online fantasy literature magazine.")
    assert "Tim" in kws and "literature" in kws


@pytest.mark.models
def test_real_model_merge_is_guarded():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from memrefine_edge.backends import model_path
    from memrefine_edge.core import ModelError
    from memrefine_edge.judging import LlamaMerger

    try:
        model_path("llm")
    except ModelError as exc:
        pytest.skip(f"judge GGUF missing ({exc})")
    m = GuardedMerger(LlamaMerger(max_tokens=48), retries=0)
    out = m.merge("Tim ran a marathon in Rome in 2019.", "Tim: I finished the Rome marathon in 3 hours.", "")
    assert not m.missing(out.content, "Tim ran a marathon in Rome in 2019.", "Tim: I finished the Rome marathon in 3 hours.")


def test_a_missing_merge_model_file_is_reported_at_construction(tmp_path):
    from memrefine_edge.core import ModelNotFoundError
    from memrefine_edge.judging import LlamaMerger

    with pytest.raises(ModelNotFoundError, match="nope.gguf"):
        LlamaMerger(tmp_path / "nope.gguf")


# --- long entries: nothing is cut -------------------------------------------------------------

_PAD = ("Meeting notes from the Tuesday planning session. " * 50)[:2100]


def test_long_entries_keep_their_tails():
    a, b = _PAD + " Ana flight code QX7781.", _PAD + " Ben hotel room 512."
    merged = GuardedMerger(None).merge(a, b, "")
    assert "QX7781" in merged.content and "512" in merged.content


def test_llm_merge_of_long_entries_is_checked_against_the_full_texts():
    # The model sees (at most) the quoted start of each entry and writes only that:
    # the check on the full texts must notice the tails are missing.
    a, b = _PAD + " Ana flight code QX7781.", _PAD + " Ben hotel room 512."
    merger = GuardedMerger(FakeMerger([_PAD]))
    merged = merger.merge(a, b, "")
    assert "QX7781" in merged.content and "512" in merged.content
    assert merged.source in ("repair", "concat")


def test_merge_longer_than_the_limit_is_refused_not_cut():
    from memrefine_edge.judging._merger import MAX_MERGED_CHARS

    words = [f"topic{i} detail{i * 7}." for i in range(MAX_MERGED_CHARS // 20)]
    a = " ".join(words[: len(words) // 2 + 50])
    b = " ".join(words[len(words) // 2 - 50:]) + " Ben hotel room 512."
    assert len(a) < MAX_MERGED_CHARS and len(b) < MAX_MERGED_CHARS
    with pytest.raises(MergeOutputError, match="preserve the pair"):
        GuardedMerger(None).merge(a, b, "")


def test_concatenation_known_too_long_is_refused_as_the_full_one_would_be():
    from memrefine_edge.judging._merger import MAX_MERGED_CHARS, _concat_content

    long_a = "Caroline: " + " ".join(f"She kept topic{i} with detail{i * 7}." for i in range(MAX_MERGED_CHARS // 30))
    short = "Caroline: She visited Oslo in 2021 with Ben."
    cases = [(long_a, short), (short, long_a), (short, "Melanie: The festival is in May."), ("Hi!", "Thanks!"),
             (long_a, long_a + " Also Oslo.")]
    for a, b in cases:
        full = _concat_content(a, b)
        assert full == concat_merge(a, b).content
        for limit in (len(full) - 1, len(full), MAX_MERGED_CHARS):
            assert _concat_content(a, b, limit=limit) == (full if len(full) <= limit else None)
    assert len(long_a) > MAX_MERGED_CHARS  # A's facts alone are over the limit: refused before B is read
    merger = GuardedMerger(None)
    with pytest.raises(MergeOutputError, match="longer than 8,000 characters; preserve the pair"):
        merger.merge(long_a, short, "")
    assert merger.stats["failures"] == 1 and merger.stats["fallbacks"] == 1


def test_long_entry_merge_chain_in_a_real_store_keeps_every_fact(tmp_path):
    from memrefine_edge.engine import Compressor
    from memrefine_edge.judging import default_judge
    from memrefine_edge.methods import get_method
    from memrefine_edge.store import MemoryStore, import_file
    from memrefine_edge.testing import HashEncoder

    src = tmp_path / "long.jsonl"
    rows = [{"id": "a", "content": _PAD + " Ana flight code QX7781."},
            {"id": "b", "content": _PAD + " Ben hotel room 512."},
            {"id": "c", "content": "Weather in Cairo was sunny on 4 June."},
            {"id": "d", "content": _PAD + " Cleo booked table 9 at Nopa."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with MemoryStore(tmp_path / "s.db") as store:
        import_file(store, src, format="jsonl")
        comp = Compressor(store, encoder=HashEncoder(), merger=GuardedMerger(None),
                          method=get_method("memrefine", judge=default_judge("fact")), mode="paper")
        report = comp.run(budget=0.4)
        text = " ".join(e.content for e in store.entries())
        assert report.actions.get("merge", 0) >= 2  # a merged entry (> 2,000 characters) was merged again
    for fact in ("QX7781", "room 512", "table 9", "Cairo"):
        assert fact in text


def test_the_deterministic_merge_says_its_length_before_it_is_written():
    pairs = [("Ana took up kayaking in Lisbon in 1990.", "Ben met his chess teacher at Oslo during 2004."),
             ("Caroline: I went to the LGBTQ support group yesterday.",
              "Caroline: I went to the support group yesterday and it was great."),
             ("Zoë lives in Zürich.", "Zoë lives in Zürich since 2019.")]
    guarded = GuardedMerger(None)
    for a, b in pairs:
        expected = len(guarded.merge(a, b, "").content.encode("utf-8"))
        assert guarded.least_bytes(a, b) == expected  # bytes, not characters
    # with a model inside, the length is not known before it writes
    assert GuardedMerger(FakeMerger()).least_bytes(*pairs[0]) is None
    assert FakeMerger().least_bytes(*pairs[0]) is None
