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
ratio could have. When that is fewer than the sessions still holding facts, the target cannot be met
without putting different days' facts into one entry, or without losing facts.

    python bench/turns_floor.py                # LoCoMo from ../shared/data/locomo, or MEMREFINE_LOCOMO
    python bench/turns_floor.py --word-lists   # small talk by the word lists alone

Writes ``bench/results/turns_floor.json`` (``turns_floor_word_lists.json``; numbers only: no LoCoMo text,
no paths).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _locomo import dev_json  # noqa: E402  (bench/ is the script's folder, first on sys.path)

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.entry import Entry, json_size  # noqa: E402
from memrefine_edge.eval.report import machine_info, write_json  # noqa: E402
from memrefine_edge.facts import coverage_keys, extract, sentence_scans, strip_speaker  # noqa: E402
from memrefine_edge.importers import parse_file  # noqa: E402

SAMPLES = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
TARGET = 0.30
MIN_WORD_COVER = 0.75


def _list_bytes(item: str) -> int:
    """Bytes one more string adds to a JSON list (quotes and the ``", "`` separator)."""
    return len(json.dumps(item, ensure_ascii=False).encode("utf-8")) + 2


def floor(entries: list[Entry], *, any_speaker: bool = False, classify: bool = True) -> dict:
    """The lower bound for one conversation's turns (see the module docstring)."""
    base = sum(json_size(e) for e in entries)
    stated = []  # (entry index, speaker, sentence, strict facts, words)
    for i, e in enumerate(entries):
        speaker, _ = strip_speaker(e.content)
        for sentence, filler, _words in sentence_scans(e.content, classify=classify):
            if filler or sentence.rstrip().endswith("?"):
                continue
            f = extract(sentence, classify=classify)
            stated.append((i, speaker, sentence, set(f.names) | set(f.numbers) | set(f.dates), f.words))
    keys = [coverage_keys(extract(s, classify=classify)) for _, _, s, _, _ in stated]
    kept_text = 0
    kept_turns: set[int] = set()
    for i, speaker, sentence, strict, words in stated:
        covered = any(
            j != i and (any_speaker or speaker2 == speaker) and strict <= keys[n]
            and (not words or len(words & keys[n]) >= MIN_WORD_COVER * len(words))
            for n, (j, speaker2, _s, _st, _w) in enumerate(stated))
        if not covered:
            kept_text += len(sentence.encode("utf-8"))
            kept_turns.add(i)
    sessions = {entries[i].metadata.get("session") for i in kept_turns}
    stamps = {ts for i in kept_turns for ts in entries[i].timestamps[:1]}
    bookkeeping = sum(_list_bytes(ts) for ts in stamps) + sum(_list_bytes(p) for i in kept_turns
                                                              for p in entries[i].provenance)
    empty = json_size(Entry(id="x", content="x")) - 2  # every key with an empty value
    one_entry = kept_text + bookkeeping + empty
    room = int(TARGET * base) - kept_text - bookkeeping
    return {
        "turns": len(entries), "json_bytes": base,
        "stated_text_ratio": round(sum(len(s.encode("utf-8")) for _, _, s, _, _ in stated) / base, 4),
        "kept_text_ratio": round(kept_text / base, 4), "turns_holding_facts": len(kept_turns),
        "sessions_holding_facts": len(sessions), "bookkeeping_ratio": round(bookkeeping / base, 4),
        "floor_one_entry_ratio": round(one_entry / base, 4),
        "max_entries_at_target": max(0, room // empty),
    }


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
    for sample in SAMPLES:
        entries, _ = parse_file(data, format="locomo-turns", sample_id=sample)
        for rule, any_speaker in (("same_speaker", False), ("any_speaker", True)):
            out[rule][sample] = row = floor(entries, any_speaker=any_speaker, classify=not args.word_lists)
            print(f"{sample} {rule}: stated {row['stated_text_ratio']:.3f}, kept text {row['kept_text_ratio']:.3f}, "
                  f"floor (one entry) {row['floor_one_entry_ratio']:.3f}; at {TARGET:.0%} at most "
                  f"{row['max_entries_at_target']} entries for {row['turns_holding_facts']} turns in "
                  f"{row['sessions_holding_facts']} sessions that hold facts", flush=True)
    write_json(out_path, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
