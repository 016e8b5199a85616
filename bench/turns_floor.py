"""How small can a LoCoMo conversation stored as turns get in paper mode without losing a fact?

A lower bound, per dev conversation, on the ``json`` bytes of any store that keeps every fact of the
conversation as the labelling rules define it (``../shared/docs/judge-labelling.md``), built generously:

* **Text.** Only sentences that *state* something must stay: small talk (the fact extractor's: its word
  lists and the learned classifier, which finds about 58% of the small talk labellers mark) and questions
  are counted as free to drop. The rest of the small talk still counts as stated, so the floor under
  the labelling rules themselves may be some points lower (``--word-lists`` shows the word lists alone).
  A stated sentence may also go when another turn *of the same speaker* (rule 6: the speaker is part of
  the fact) covers it: every name, number and date of it and at least 75% of its content words (the
  product's own coverage test, which already lets a quarter of the words go). The ``any_speaker`` rows let
  another speaker's sentence cover it too. What is left is counted at its UTF-8 bytes without JSON
  escaping or speaker labels.
* **Merge bookkeeping** (the paper's store update rule): a merged entry keeps every timestamp of its
  sources, and this product keeps their provenance. Counted: one timestamp per session that still holds
  a fact, one provenance id per turn that does, each at its bytes in a JSON list.
* **Entries.** Each entry costs at least the JSON keys of the metric's fields with an empty value
  (``{"id": "", "content": "", ...}``), whatever packing is allowed.

From these the script reports the floor with a single entry (the whole conversation packed into one:
what no judge that keeps distinct facts apart would write) and the most entries a store at the target
ratio could have, at the bare field names' cost and at what an entry of the store really costs beside
its text (id, keywords, links, metadata). When that is fewer than the sessions still holding facts, the
target cannot be met without putting different days' facts into one entry, or without losing facts.

**Labels estimate.** The classifier finds only part of the small talk, so the rows above still count
some of it as stated. ``labels_estimate`` replaces the extractor's small talk by the labellers' own
(``bench/smalltalk/labels.jsonl``: 100 of each conversation's undecided turn sentences, drawn
uniformly): the byte share of small talk among the undecided sentences the classifier keeps leaves the
kept text, the share of facts among the ones it drops comes back, and the interval is a bootstrap over
the labelled sentences. It still lets a covered sentence go on its own, which no whole-entry delete
can do.

    python bench/turns_floor.py                # LoCoMo from ../shared/data/locomo, or MEMREFINE_LOCOMO
    python bench/turns_floor.py --word-lists   # small talk by the word lists alone

Writes ``bench/results/turns_floor.json`` (``turns_floor_word_lists.json``; numbers only: no LoCoMo text,
no paths).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _locomo import dev_json  # noqa: E402  (bench/ is the script's folder, first on sys.path)

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.core import Entry, json_size  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.store import parse_file  # noqa: E402
from memrefine_edge.text import coverage_keys, extract, is_filler, sentence_scans, strip_speaker  # noqa: E402

SAMPLES = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
TARGET = 0.30
MIN_WORD_COVER = 0.75
LABELS = ROOT / "bench" / "smalltalk" / "labels.jsonl"


def _list_bytes(item: str) -> int:
    """Bytes one more string adds to a JSON list (quotes and the ``", "`` separator)."""
    return len(json.dumps(item, ensure_ascii=False).encode("utf-8")) + 2


def _undecided(sentence: str) -> bool:
    """Whether the word lists cannot tell ``sentence`` from small talk (the sentences the classifier
    decides, and the ones the labelled sample in ``bench/smalltalk`` was drawn from)."""
    f = extract(sentence, classify=False)
    return (not is_filler(sentence, classify=False) and not sentence.rstrip().endswith("?")
            and not (f.names or f.numbers or f.dates))


def _stated(entries: list[Entry], classify: bool) -> tuple[list[tuple], dict[tuple[int, int], int]]:
    """The sentences that state something, ``(entry, sentence index, speaker, sentence, strict facts,
    words, undecided)``, and the bytes of each undecided sentence the classifier called small talk."""
    stated, dropped = [], {}
    for i, e in enumerate(entries):
        speaker, _ = strip_speaker(e.content)
        for n, (sentence, filler, _words) in enumerate(sentence_scans(e.content, classify=classify)):
            undecided = _undecided(sentence)
            if filler and undecided:
                dropped[(i, n)] = len(sentence.encode("utf-8"))
            if filler or sentence.rstrip().endswith("?"):
                continue
            f = extract(sentence, classify=classify)
            stated.append((i, n, speaker, sentence, set(f.names) | set(f.numbers) | set(f.dates), f.words,
                           undecided))
    return stated, dropped


def _kept(stated: list[tuple], any_speaker: bool) -> list[tuple]:
    """The stated sentences no other stated sentence covers."""
    keys = [coverage_keys(extract(row[3])) for row in stated]
    return [row for row in stated if not any(
        other[0] != row[0] and (any_speaker or other[2] == row[2]) and row[4] <= keys[m]
        and (not row[5] or len(row[5] & keys[m]) >= MIN_WORD_COVER * len(row[5]))
        for m, other in enumerate(stated))]


def _row(entries: list[Entry], base: int, stated_bytes: int, kept_text: float, kept_turns: set[int],
         turns_holding_facts: float) -> dict:
    sessions = {entries[i].metadata.get("session") for i in kept_turns}
    stamps = {ts for i in kept_turns for ts in entries[i].timestamps[:1]}
    bookkeeping = sum(_list_bytes(ts) for ts in stamps) + sum(_list_bytes(p) for i in kept_turns
                                                              for p in entries[i].provenance)
    empty = json_size(Entry(id="x", content="x")) - 2  # every key with an empty value
    # What an entry of this store really costs beside its text and bookkeeping: keys, id, keywords,
    # links and metadata, averaged over the turns (a merged entry keeps them too).
    real = sum(json_size(replace(e, content="", timestamps=(), provenance=())) for e in entries) / len(entries)
    one_entry = kept_text + bookkeeping + empty
    room = int(TARGET * base - kept_text) - bookkeeping
    return {
        "turns": len(entries), "json_bytes": base,
        "stated_text_ratio": round(stated_bytes / base, 4),
        "kept_text_ratio": round(kept_text / base, 4), "turns_holding_facts": round(turns_holding_facts, 1),
        "sessions_holding_facts": len(sessions), "bookkeeping_ratio": round(bookkeeping / base, 4),
        "floor_one_entry_ratio": round(one_entry / base, 4),
        "max_entries_at_target": max(0, room // empty),
        "entry_cost_bytes": round(real, 1), "max_entries_at_entry_cost": max(0, int(room // real)),
    }


def floor(entries: list[Entry], *, any_speaker: bool = False, classify: bool = True) -> dict:
    """The lower bound for one conversation's turns (see the module docstring)."""
    base = sum(json_size(e) for e in entries)
    stated, _dropped = _stated(entries, classify)
    kept = _kept(stated, any_speaker)
    turns = {row[0] for row in kept}
    return _row(entries, base, sum(len(row[3].encode("utf-8")) for row in stated),
                sum(len(row[3].encode("utf-8")) for row in kept), turns, len(turns))


def labels_estimate(entries: list[Entry], labels: dict[tuple[int, int], bool], *, rounds: int = 2000) -> dict:
    """The same-speaker floor with small talk as the labellers mark it, estimated from the labelled sample.

    ``labels`` maps ``(entry, sentence index)`` of a uniformly drawn sample of the undecided sentences to
    whether it is small talk. From the sample come two byte shares: of the undecided sentences the
    classifier keeps, how much is small talk (that text leaves the kept text, at the rate the coverage
    test kept such sentences), and of the ones it drops, how much is fact (that text comes back, at the
    same rate). A turn whose kept sentences are all undecided holds a fact unless all of them are small
    talk (count share, independent sentences). The interval resamples the labelled sentences
    (``rounds`` bootstrap rounds, fixed seed): 2.5th and 97.5th percentiles.
    """
    base = sum(json_size(e) for e in entries)
    stated, dropped = _stated(entries, True)
    kept = _kept(stated, False)
    size = {(row[0], row[1]): len(row[3].encode("utf-8")) for row in stated if row[6]}
    size.update(dropped)
    kept_undecided = sum(len(row[3].encode("utf-8")) for row in kept if row[6])
    all_undecided = sum(len(row[3].encode("utf-8")) for row in stated if row[6])
    keep_rate = kept_undecided / all_undecided if all_undecided else 0.0
    kept_text = sum(len(row[3].encode("utf-8")) for row in kept)
    per_turn: dict[int, list[bool]] = {}
    for row in kept:
        per_turn.setdefault(row[0], []).append(row[6])
    only_undecided = [len(flags) for flags in per_turn.values() if all(flags)]
    sample = sorted(ref for ref in labels if ref in size)

    def estimate(refs: list[tuple[int, int]]) -> tuple[float, float, float]:
        kept_refs = [r for r in refs if r not in dropped]
        dropped_refs = [r for r in refs if r in dropped]
        st_bytes = sum(size[r] for r in kept_refs if labels[r]) / max(1, sum(size[r] for r in kept_refs))
        fact_bytes = sum(size[r] for r in dropped_refs if not labels[r]) / max(1, sum(size[r] for r in dropped_refs))
        st_count = sum(labels[r] for r in kept_refs) / max(1, len(kept_refs))
        text = kept_text - kept_undecided * st_bytes + sum(dropped.values()) * fact_bytes * keep_rate
        turns = len(per_turn) - sum(st_count ** k for k in only_undecided)
        return text, turns, st_bytes

    text, turns, st_share = estimate(sample)
    row = _row(entries, base, sum(len(r[3].encode("utf-8")) for r in stated), text, set(per_turn), turns)
    rng = random.Random(20261207)
    draws = []
    for _ in range(rounds):
        t, n, _s = estimate([rng.choice(sample) for _ in sample])
        at = _row(entries, base, 0, t, set(per_turn), n)
        draws.append((at["max_entries_at_target"], t / base, at["max_entries_at_entry_cost"]))
    entries_sorted = sorted(d[0] for d in draws)
    text_sorted = sorted(d[1] for d in draws)
    real_sorted = sorted(d[2] for d in draws)
    lo, hi = int(0.025 * rounds), int(0.975 * rounds) - 1
    row.update({
        "labelled_sentences": len(sample), "small_talk_share_of_kept_undecided_bytes": round(st_share, 4),
        "kept_text_ratio_interval": [round(text_sorted[lo], 4), round(text_sorted[hi], 4)],
        "max_entries_at_target_interval": [entries_sorted[lo], entries_sorted[hi]],
        "max_entries_at_entry_cost_interval": [real_sorted[lo], real_sorted[hi]],
    })
    return row


def _labels(sample: str, entries: list[Entry]) -> dict[tuple[int, int], bool]:
    """The labelled turn sentences of one conversation, by ``(entry, sentence index)``."""
    position = {e.id: i for i, e in enumerate(entries)}
    out = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        kind, conv, ref = row["id"].split(":", 2)
        if kind == "turns" and conv == sample:
            entry_id, n = ref.rsplit("#", 1)
            out[(position[entry_id], int(n))] = row["label"] == "small_talk"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="default: bench/results/turns_floor[_word_lists].json")
    ap.add_argument("--word-lists", action="store_true", help="small talk by the word lists alone (no classifier)")
    args = ap.parse_args()
    name = "turns_floor_word_lists.json" if args.word_lists else "turns_floor.json"
    out_path = Path(args.out or ROOT / "bench" / "results" / name)
    data = dev_json()
    command = "python bench/turns_floor.py" + (" --word-lists" if args.word_lists else "")
    out: dict = {"command": command, "small_talk": "word lists" if args.word_lists else "word lists and classifier",
                 "target_ratio": TARGET, "min_word_cover": MIN_WORD_COVER,
                 "machine": machine_info(__version__), "same_speaker": {}, "any_speaker": {}}
    if not args.word_lists:
        out["labels_estimate"] = {}
    for sample in SAMPLES:
        entries, _ = parse_file(data, format="locomo-turns", sample_id=sample)
        for rule, any_speaker in (("same_speaker", False), ("any_speaker", True)):
            out[rule][sample] = row = floor(entries, any_speaker=any_speaker, classify=not args.word_lists)
            print(f"{sample} {rule}: stated {row['stated_text_ratio']:.3f}, kept text {row['kept_text_ratio']:.3f}, "
                  f"floor (one entry) {row['floor_one_entry_ratio']:.3f}; at {TARGET:.0%} at most "
                  f"{row['max_entries_at_target']} entries ({row['max_entries_at_entry_cost']} at "
                  f"{row['entry_cost_bytes']:.0f} B each) for {row['turns_holding_facts']} turns in "
                  f"{row['sessions_holding_facts']} sessions that hold facts", flush=True)
        if not args.word_lists:
            out["labels_estimate"][sample] = row = labels_estimate(entries, _labels(sample, entries))
            print(f"{sample} labels estimate: kept text {row['kept_text_ratio']:.3f} "
                  f"{row['kept_text_ratio_interval']}; at {TARGET:.0%} at most {row['max_entries_at_target']} "
                  f"{row['max_entries_at_target_interval']} entries ({row['max_entries_at_entry_cost']} "
                  f"{row['max_entries_at_entry_cost_interval']} at their cost) for "
                  f"{row['turns_holding_facts']} turns",
                  flush=True)
    write_json(out_path, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
