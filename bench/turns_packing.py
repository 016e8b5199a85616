"""What packing buys on turns in paper mode: the default judge against two judges that merge what it preserves.

The default judge preserves pairs of distinct facts, so a LoCoMo conversation stored as turns stops short of
30% in paper mode. This benchmark measures what merging those pairs instead would do, with the same
pipeline (fast path, redundancy scorer, hard fact checks, the deterministic fact-keeping merge) and one
change to the judge: where the scorer says ``preserve``,

* ``same_session`` merges the pair when both entries hold only turns of the same speaker in the same
  session (the most generous reading of the labelling rules' "same event" merge, rule 3);
* ``same_speaker`` merges it when both hold only turns of the same speaker, any session (packing a
  speaker's facts together, which rule 4 calls not acceptable for distinct facts).

Which turns an entry holds is read from its sentences (a merged entry keeps its sources' sentences); a
sentence said in more than one place counts for each, so such an entry never qualifies: the variants merge
a little less than their rule allows. The three judges compress the 7 dev conversations as turns in paper
mode, chained to 50% and 30%, and the evaluation's retrieval metrics (answer recall@1000, answer presence)
are measured on what they reach. Compare with the committed baselines at the same budgets
(``bench/results/eval/``).

    python bench/turns_packing.py     # LoCoMo from ../shared/data/locomo, or MEMREFINE_LOCOMO; ~10 min

Writes ``bench/results/turns_packing.json`` (numbers only: no LoCoMo text, no paths).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _locomo import dev_json  # noqa: E402  (bench/ is the script's folder, first on sys.path)

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.core import (
    Decision,  # noqa: E402
    Entry,  # noqa: E402
)
from memrefine_edge.engine import Backends, PipelineConfig  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.judging import GuardedJudge, Judge, ScorerJudge
from memrefine_edge.judging._choice import scorer_guard  # noqa: E402
from memrefine_edge.store import parse_file  # noqa: E402
from memrefine_edge.text import sentence_scans, strip_speaker  # noqa: E402

SAMPLES = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
BUDGETS = (1.0, 0.5, 0.3)
VARIANTS = ("default", "same_session", "same_speaker")
KEPT = ("entries", "ratio_json", "budget_met", "answer_recall@1000", "presence")


def _sentences(text: str) -> list[str]:
    """The sentences of a text, each without a speaker prefix (a merged entry names each part's speaker)."""
    return [strip_speaker(s)[1] for s, _filler, _words in sentence_scans(text, classify=False)]


class Origins:
    """Where each sentence of the conversations was said: ``(sample, session, speaker)``."""

    def __init__(self, stores: dict[str, list[Entry]]) -> None:
        self._where: dict[str, set[tuple[str, object, str | None]]] = {}
        for sample, entries in stores.items():
            for e in entries:
                speaker, _ = strip_speaker(e.content)
                for sentence in _sentences(e.content):
                    self._where.setdefault(sentence, set()).add((sample, e.metadata.get("session"), speaker))

    def of(self, text: str) -> set[tuple[str, object, str | None]]:
        out: set[tuple[str, object, str | None]] = set()
        for sentence in _sentences(text):
            out |= self._where.get(sentence, set())
        return out


class PackingJudge(Judge):
    """The redundancy scorer, with its ``preserve`` turned into ``merge`` where the variant's rule allows."""

    uses_model = False

    def __init__(self, origins: Origins, variant: str) -> None:
        self._inner = ScorerJudge()
        self._origins = origins
        self._variant = variant
        self.flipped = 0

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        d = self._inner.decide(a, b, similarity)
        if d.action != "preserve":
            return d
        wa, wb = self._origins.of(a), self._origins.of(b)
        if self._variant == "same_session":
            same = len(wa) == 1 and wa == wb
        else:
            same = bool(wa) and len({(w[0], w[2]) for w in wa | wb}) == 1
        if not same:
            return d
        self.flipped += 1
        return Decision("merge", None, merge_instruction="Keep every fact of both entries.",
                        reason=f"{self._variant}: preserved pair merged", source="scorer")


def run(variant: str, origins: Origins, encoder: object) -> dict:
    from memrefine_edge.eval import EvalConfig, run_eval
    from memrefine_edge.eval._report import summarize

    judges: list[PackingJudge] = []

    class _Backends(Backends):
        def judge(self, config: PipelineConfig) -> GuardedJudge:
            if variant == "default":
                return scorer_guard(ScorerJudge())
            inner = PackingJudge(origins, variant)
            judges.append(inner)
            return scorer_guard(inner)  # what default_judge builds around the scorer

    with tempfile.TemporaryDirectory(prefix="memrefine-packing-") as work:
        config = EvalConfig(data=dev_json(), out=Path(work), samples=SAMPLES, store="turns",
                            methods=("memrefine",), budgets=BUDGETS, qa=False, chain=True, context_bytes=(1000,))
        summary = summarize(run_eval(config, encoder=encoder, backends=_Backends()))
    per = summary["methods"]["memrefine"]
    out = {f"{b:g}": {k: round(per[f"{b:g}"][k], 4) for k in KEPT} for b in BUDGETS if b < 1.0}
    out["preserves_merged"] = sum(j.flipped for j in judges)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "turns_packing.json"))
    args = ap.parse_args()
    from memrefine_edge.backends import OnnxEncoder

    data = dev_json()
    origins = Origins({s: parse_file(data, format="locomo-turns", sample_id=s)[0] for s in SAMPLES})
    encoder = OnnxEncoder()
    result: dict = {"command": "python bench/turns_packing.py", "samples": list(SAMPLES), "store": "turns",
                    "mode": "paper", "budgets": list(BUDGETS), "chain": True, "context_bytes": 1000,
                    "machine": machine_info(__version__), "variants": {}}
    for variant in VARIANTS:
        result["variants"][variant] = row = run(variant, origins, encoder)
        for b in ("0.5", "0.3"):
            r = row[b]
            print(f"{variant} asked {b}: reached {r['ratio_json']:.3f} ({r['budget_met']}/{len(SAMPLES)} met), "
                  f"{r['entries']:.0f} entries per conversation, answer recall@1000 {r['answer_recall@1000']:.3f}, "
                  f"presence {r['presence']:.3f}", flush=True)
    write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
