"""The pair judge: delete (which one), merge (with an instruction) or preserve.

Pipeline (:class:`GuardedJudge`), for a pair ``(a, b)`` proposed by similarity:

1. **fast path** (``source="rule"``): exact / normalised duplicates, one entry
   contained in the other, pure filler -- :func:`memrefine_edge.judging._fastpath.fast_path`.
2. **inner judge**: by default :class:`ScorerJudge` (``source="scorer"``), the
   learned redundancy scorer of :mod:`memrefine_edge.judging._scorer` with its hard
   fact checks; or :class:`FactJudge` (word-coverage rules) or a GGUF model
   through :class:`LlamaJudge` (``source="llm"``). LLM output that does not
   parse raises :class:`JudgeOutputError`; the pipeline retries once, then
   preserves (``source="fallback"``).
3. **fact guard** (``source="guard"``, :meth:`GuardedJudge.guard`): a delete
   is applied only when the kept entry carries the facts of the deleted one,
   each bound as it was -- a number with what it counts, a name in its role and
   said by the same speaker, a negation on the same statement
   (:func:`memrefine_edge.text._bindings.lost_facts`). Otherwise the other entry is
   deleted if *that* is safe, else the pair is merged with an instruction
   naming the facts each side must keep (when the similarity says it is
   plausibly one event) or preserved (distinct facts).
   A merge where one entry already covers the other becomes a delete. Behind
   the scorer the guard checks strict facts only (names, numbers, dates,
   negation: ``min_word_cover=0``), so a paraphrase the scorer recognises can
   be deleted although its wording differs.

On the labelled pairs (``bench/judge_labels/``, test conversations that
nothing was fitted on) the scorer is the most accurate judge and the cheapest;
the word-coverage :class:`FactJudge` merges most distinct facts, and no GGUF
model measured adds accuracy, so the default loads none (the figures:
``bench/results/judge_configs.md`` and the docs' judge page).

:class:`LlamaJudge` runs any GGUF with llama.cpp. Its default mode scores the
three actions from the next-token log-probabilities of one forward pass
(prompt, then ``{"action": "``) instead of generating JSON, and reads the
delete target the same way (``a`` vs ``b``); the fixed instructions come
first so llama.cpp reuses their evaluation (several times faster per pair). The
merge instruction is built deterministically from the facts that differ
(:func:`merge_instruction_for`). ``mode="generate"`` writes the full JSON
decision (``constrained=True`` forces the schema with a grammar) -- for users
with a model big enough to write its own instructions.

``merge_min_similarity`` (:data:`DEFAULT_MERGE_MIN_SIMILARITY` = 0.5 for the
fact judge and GGUF judges): what a refused delete becomes when both entries
hold facts of their own -- a merge at or above it, preserve below
(``bench/results/merge_threshold.md``). For the scorer it is an optional
floor: its merges below it become preserves.
"""

from __future__ import annotations

import abc
import json
import math
import os
import re
import warnings
from typing import Any, ClassVar, Literal

from memrefine_edge.core import Decision, JudgeOutputError, Target
from memrefine_edge.text import coverage_keys, describe, extract, lost_facts, sentence_scans, stated_words

from ._fastpath import fast_path
from ._prompts import DECISION_SCHEMA, build_messages

#: Default similarity at or above which the fact guard merges (instead of
#: preserving) a pair whose entries both hold facts of their own. See the
#: module docstring for the measurement behind 0.5.
DEFAULT_MERGE_MIN_SIMILARITY = 0.5

#: The share of a deleted entry's content words (of its sentences that state something) the kept entry must
#: carry for the scorer's delete to be taken: the scorer judges paraphrases, this keeps it from deleting a turn
#: that states something beside another of the same chat. Chosen on the first two label sets (docs/judge.md).
DEFAULT_DELETE_WORD_COVER = 0.5

__all__ = [
    "DEFAULT_MERGE_MIN_SIMILARITY", "Judge", "LlamaJudge", "ScorerJudge", "GuardedJudge", "FactJudge",
    "parse_decision", "merge_instruction_for",
]


class Judge(abc.ABC):
    """Decides one pair: one abstract method, :meth:`decide`, which is also how every caller asks.

    The hooks have defaults: :meth:`load`, :meth:`describe`, :attr:`stats`
    and :attr:`uses_model`.
    """

    #: Whether :meth:`decide` runs a language model (counted as an LLM call in reports).
    uses_model: ClassVar[bool] = True

    @abc.abstractmethod
    def decide(self, a: str, b: str, similarity: float) -> Decision:
        """The decision for entries ``a`` and ``b`` (contents) at cosine ``similarity``."""

    def load(self) -> None:
        """Load any model now, so a broken model file fails before a run records anything."""

    def describe(self) -> dict[str, Any]:
        """Settings recorded with a run (the class name; subclasses add their knobs)."""
        return {"type": type(self).__name__}

    @property
    def stats(self) -> dict[str, int]:
        """What the judge counted so far (``llm_calls`` among them, if it calls a model); default: nothing."""
        return {}

    def judge(self, a: str, b: str, similarity: float = 0.0) -> Decision:
        """Deprecated: call :meth:`decide`. Checks the arguments, then decides."""
        warnings.warn("Judge.judge() and calling a judge are deprecated: call judge.decide(a, b, similarity)",
                      DeprecationWarning, stacklevel=2)
        if not isinstance(a, str) or not isinstance(b, str):
            raise TypeError("entries must be strings")
        if isinstance(similarity, bool) or not isinstance(similarity, (int, float)):
            raise TypeError("similarity must be a number")
        if math.isnan(similarity) or not -1.0 - 1e-6 <= similarity <= 1.0 + 1e-6:
            raise ValueError(f"similarity must be in [-1, 1], got {similarity}")
        return self.decide(a, b, float(similarity))

    __call__ = judge


_ACTION_ALIASES = {"delete": "delete", "merge": "merge", "preserve": "preserve", "nothing": "preserve",
                   "keep": "preserve", "none": "preserve"}


def parse_decision(raw: str) -> Decision:
    """Parse model output (a JSON object, possibly with text around it) into a Decision.

    Raises :class:`JudgeOutputError` with the raw text when it does not fit the schema.
    """
    m = re.search(r"\{.*\}", raw, re.DOTALL)
    if not m:
        raise JudgeOutputError("judge output holds no JSON object", raw=raw)
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise JudgeOutputError(f"judge output is not valid JSON ({exc.msg})", raw=raw) from exc
    if not isinstance(obj, dict):
        raise JudgeOutputError("judge output is not a JSON object", raw=raw)
    action = _ACTION_ALIASES.get(str(obj.get("action", "")).strip().lower())
    if action is None:
        raise JudgeOutputError(f"unknown action {obj.get('action')!r}", raw=raw)
    target = str(obj.get("target") or "").strip().lower()
    if action == "delete" and target not in ("a", "b"):
        raise JudgeOutputError(f"delete without a valid target ({obj.get('target')!r})", raw=raw)
    instruction = obj.get("merge_instruction") or ""
    reason = obj.get("reason") or ""
    if not isinstance(instruction, str) or not isinstance(reason, str):
        raise JudgeOutputError("merge_instruction and reason must be strings", raw=raw)
    return Decision(action=action, target=target if action == "delete" else None,  # type: ignore[arg-type]
                    merge_instruction=instruction.strip() if action == "merge" else "",
                    reason=reason.strip()[:500], source="llm")


def merge_instruction_for(a: str, b: str, *, min_word_cover: float = 0.75) -> str:
    """A deterministic merge instruction: the facts each entry holds that the other lacks."""
    only_a = lost_facts(a, b, min_word_cover=min_word_cover)
    only_b = lost_facts(b, a, min_word_cover=min_word_cover)
    parts = ["Merge A and B into one entry that keeps every fact of both and who said it"]
    if only_a:
        parts.append(f"from A keep: {describe(only_a, a)}")
    if only_b:
        parts.append(f"from B keep: {describe(only_b, b)}")
    return "; ".join(parts) + "."


# --- llama.cpp judge --------------------------------------------------------------


class LlamaJudge(Judge):
    """A judge backed by a local GGUF model through llama.cpp.

    ``mode="logits"`` (default): one forward pass over the prompt ending in
    ``{"action": "``; the action is the option whose first token has the
    highest log-probability; for a delete a second short pass reads ``a`` vs
    ``b`` after ``delete", "target": "``. ``mode="generate"``: the model
    writes the JSON decision (``constrained=True`` forces the schema with a
    grammar; free generation is parsed and may raise
    :class:`JudgeOutputError`).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        mode: Literal["logits", "generate"] = "logits",
        few_shot: bool = False,
        constrained: bool = False,
        reuse_prefix: bool = True,
        n_threads: int = 1,
        n_ctx: int = 2048,
        max_tokens: int = 160,
        seed: int = 1234,
    ) -> None:
        if mode not in ("logits", "generate"):
            raise ValueError("mode must be 'logits' or 'generate'")
        from memrefine_edge.backends import LlamaModel

        # The path is checked now: a wrong one fails before a run commits decisions.
        self.model = LlamaModel(model_path, n_ctx=n_ctx, n_threads=n_threads, seed=seed)
        self.model_path = model_path
        self.mode = mode
        self.few_shot = few_shot
        self.constrained = constrained
        self.reuse_prefix = reuse_prefix
        self.max_tokens = max_tokens
        self.last_prompt_tokens = 0
        self.last_generated_tokens = 0

    def describe(self) -> dict[str, Any]:
        """The model file and decoding settings, recorded with each run."""
        return {"type": "LlamaJudge", "model": self.model.name, "mode": self.mode, "few_shot": self.few_shot}

    def load(self) -> None:
        """Load the GGUF now (:class:`ModelLoadError` for a file llama.cpp cannot load)."""
        self.model.load()

    def prompt(self, a: str, b: str, similarity: float) -> str:
        """The full prompt text for one pair (chat template of the GGUF)."""
        return self.model.chat(build_messages(a, b, similarity, few_shot=self.few_shot))

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        """Judge one pair with the model (see the class docstring for the two modes)."""
        prompt = self.prompt(a, b, similarity)
        if self.mode == "logits":
            return self._decide_logits(prompt, a, b)
        return self._decide_generate(prompt)

    # logits -----------------------------------------------------------------

    def _first_token(self, prefix_ids: list[int], continuation: str, prefix: str) -> int:
        ids = self.model.tokenize(prefix + continuation)
        if ids[: len(prefix_ids)] != prefix_ids or len(ids) == len(prefix_ids):
            raise JudgeOutputError(f"cannot score option {continuation!r}: tokenizer merges it with the prompt",
                                   raw=continuation)
        return ids[len(prefix_ids)]

    def _decide_logits(self, prompt: str, a: str, b: str) -> Decision:
        head = prompt + '{"action": "'
        head_ids = self.model.tokenize(head)
        options = {name: self._first_token(head_ids, name, head) for name in ("delete", "merge", "preserve")}
        if len(set(options.values())) != 3:
            raise JudgeOutputError("the three actions share a first token; use mode='generate'", raw="")
        lp = self.model.next_token_logprobs(head_ids, reuse_prefix=self.reuse_prefix)
        scores = {name: float(lp[tok]) for name, tok in options.items()}
        action = max(scores, key=lambda k: scores[k])
        self.last_prompt_tokens = len(head_ids)
        self.last_generated_tokens = 0
        shown = " ".join(f"{k}={v:.2f}" for k, v in scores.items())
        if action == "delete":
            tail = head + 'delete", "target": "'
            tail_ids = self.model.tokenize(tail)
            ta, tb = self._first_token(tail_ids, "a", tail), self._first_token(tail_ids, "b", tail)
            lp2 = self.model.next_token_logprobs(tail_ids, reuse_prefix=True)
            target: Target = "a" if lp2[ta] >= lp2[tb] else "b"
            return Decision("delete", target, reason=f"logprobs {shown}; target a={lp2[ta]:.2f} b={lp2[tb]:.2f}",
                            source="llm")
        if action == "merge":
            return Decision("merge", None, merge_instruction=merge_instruction_for(a, b),
                            reason=f"logprobs {shown}", source="llm")
        return Decision("preserve", None, reason=f"logprobs {shown}", source="llm")

    # generate ---------------------------------------------------------------

    def _decide_generate(self, prompt: str) -> Decision:
        out = self.model.complete(prompt, max_tokens=self.max_tokens, stop=["<|im_end|>", "\n\n\n"],
                                  schema=DECISION_SCHEMA if self.constrained else None, fresh=not self.reuse_prefix)
        self.last_prompt_tokens = out.prompt_tokens
        self.last_generated_tokens = out.completion_tokens
        return parse_decision(out.text)


# --- model-free judge ----------------------------------------------------------------


class FactJudge(Judge):
    """A judge without a model: the guard's fact-coverage test used as the decision.

    Delete an entry whose facts the other covers (the one with fewer facts
    first); otherwise merge when ``similarity >= merge_min_similarity``
    (same event, complementary facts), else preserve. On the dev set it
    scores the same as the bundled 135M model behind the guard, because that
    model always answers "delete a" and the guard then decides
    (``bench/results/judge_devset.md``) -- at no model cost. Decisions carry
    ``source="guard"``.
    """

    uses_model = False

    def __init__(self, *, min_word_cover: float = 0.75,
                 merge_min_similarity: float = DEFAULT_MERGE_MIN_SIMILARITY) -> None:
        self.min_word_cover = _check_unit("min_word_cover", min_word_cover, 0.0)
        self.merge_min_similarity = _check_unit("merge_min_similarity", merge_min_similarity, -1.0)

    def describe(self) -> dict[str, Any]:
        """The judge's settings, recorded with each run."""
        return {"type": "FactJudge", "min_word_cover": self.min_word_cover,
                "merge_min_similarity": self.merge_min_similarity}

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        """Decide from fact coverage and similarity alone."""
        cover = self.min_word_cover
        a_lost = lost_facts(a, b, min_word_cover=cover)
        b_lost = lost_facts(b, a, min_word_cover=cover)
        if not a_lost or not b_lost:
            # Both covered (same facts): drop the shorter wording.
            target = "a" if not a_lost and (b_lost or len(a) <= len(b)) else "b"
            return Decision("delete", target, reason=f"facts of {target.upper()} are all in the other entry",  # type: ignore[arg-type]
                            source="guard")
        if similarity >= self.merge_min_similarity:
            return Decision("merge", None, merge_instruction=merge_instruction_for(a, b, min_word_cover=cover),
                            reason=f"each entry holds facts of its own; similarity {similarity:.2f}", source="guard")
        return Decision("preserve", None, reason=f"distinct facts (e.g. {describe(a_lost, a)}); similarity "
                                                 f"{similarity:.2f} < {self.merge_min_similarity}", source="guard")


class ScorerJudge(Judge):
    """A judge without a generative model: the learned redundancy scorer, behind the hard fact checks.

    The scorer (:class:`memrefine_edge.judging._scorer.RedundancyScorer`) ranks
    ``delete_a``, ``delete_b``, ``merge`` and ``preserve``; the most probable
    action is taken unless it is a delete that would drop a name, number,
    date or negation the kept entry lacks or binds otherwise (``50 mg`` /
    ``8 mg``, ``Ana lent Ben`` / ``Ben lent Ana``:
    :func:`memrefine_edge.text._bindings.lost_facts`), or a delete (merge) less probable
    than ``min_delete_probability`` (``min_merge_probability``) -- then the
    next most probable allowed action is. Both thresholds default to the
    values tuned with the weights. Paraphrases may be deleted even when their wording
    differs (the scorer, not a word-coverage threshold, judges that); the
    strict facts are never lost. Decisions carry ``source="scorer"`` and
    the class probabilities in their reason.
    """

    uses_model = False

    def __init__(self, *, scorer: Any = None, weights_path: str | os.PathLike[str] | None = None,
                 min_delete_probability: float | None = None, min_merge_probability: float | None = None,
                 merge_min_similarity: float | None = None, min_delete_word_cover: float | None = None) -> None:
        self._scorer = scorer  # built from weights_path (or the packaged weights) on first use
        self._min_cover = (None if min_delete_word_cover is None
                           else _check_unit("min_delete_word_cover", min_delete_word_cover, 0.0))
        self._weights_path = weights_path
        self._min_delete = (None if min_delete_probability is None
                            else _check_unit("min_delete_probability", min_delete_probability, 0.0))
        self._min_merge = (None if min_merge_probability is None
                           else _check_unit("min_merge_probability", min_merge_probability, 0.0))
        self.merge_min_similarity = (None if merge_min_similarity is None
                                     else _check_unit("merge_min_similarity", merge_min_similarity, -1.0))

    @property
    def min_delete_probability(self) -> float:
        """A delete is taken only at or above this probability (default: the value tuned with the weights)."""
        if self._min_delete is not None:
            return self._min_delete
        return float(self.scorer.meta.get("min_delete_probability", 0.0))

    @property
    def min_merge_probability(self) -> float:
        """A merge is taken only at or above this probability (default: the value tuned with the weights)."""
        if self._min_merge is not None:
            return self._min_merge
        return float(self.scorer.meta.get("min_merge_probability", 0.0))

    @property
    def min_delete_word_cover(self) -> float:
        """A delete is taken only when the kept entry carries at least this share of the content words of
        the other's sentences that state something (small talk aside; 0: the strict facts alone decide;
        default :data:`DEFAULT_DELETE_WORD_COVER`)."""
        return DEFAULT_DELETE_WORD_COVER if self._min_cover is None else self._min_cover

    @property
    def scorer(self) -> Any:
        """The :class:`~memrefine_edge.judging._scorer.RedundancyScorer` (the packaged weights unless given)."""
        if self._scorer is None:
            from ._scorer import RedundancyScorer

            self._scorer = RedundancyScorer(path=self._weights_path)
        return self._scorer

    def load(self) -> None:
        """Read the weights now, so a bad weights file fails before a run starts."""
        _ = self.scorer

    def describe(self) -> dict[str, Any]:
        """The judge's settings, recorded with each run."""
        meta = self.scorer.meta
        return {"type": "ScorerJudge", "weights": str(self._weights_path or "packaged"),
                "trained_on": meta.get("trained_on"), "l2": meta.get("l2"),
                "min_delete_probability": self.min_delete_probability,
                "min_merge_probability": self.min_merge_probability,
                "merge_min_similarity": self.merge_min_similarity,
                "min_delete_word_cover": self.min_delete_word_cover}

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        """The most probable action whose deletes keep every strict fact."""
        scores = self.scorer.score(a, b, similarity)
        shown = ", ".join(f"{c} {p:.2f}" for c, p in scores.ranked())
        min_delete, min_merge = self.min_delete_probability, self.min_merge_probability
        cover = self.min_delete_word_cover
        # What a delete the fact checks refuse becomes (tuned with the weights): the next most probable
        # action, or a merge -- the scorer found the pair redundant, and the side it would drop holds a
        # value of its own ("Lives in Lisbon" beside "Lives in Porto now"): one entry keeps both.
        refused_merges = self.scorer.meta.get("refused_delete") == "merge"
        refused = ""
        for action, p in scores.ranked():
            if action.startswith("delete"):
                if p < min_delete:
                    continue  # not sure enough that nothing is lost
                tgt: Target = "a" if action == "delete_a" else "b"
                gone, kept = (a, b) if tgt == "a" else (b, a)
                lost = lost_facts(gone, kept, min_word_cover=0.0)
                if lost:
                    # It would drop a name, number, date or negation, or one's binding.
                    refused = refused or f"; deleting {tgt.upper()} would lose {describe(lost, gone)}"
                    if refused_merges and not (self.merge_min_similarity is not None
                                               and similarity < self.merge_min_similarity):
                        other: Target = "b" if tgt == "a" else "a"
                        if (getattr(scores, f"delete_{other}") >= min_delete
                                and not lost_facts(kept, gone, min_word_cover=0.0)):
                            # The side it would keep adds nothing: that one goes instead.
                            return Decision("delete", other, reason=f"scorer: {shown}{refused}",
                                            source="scorer")
                        return Decision("merge", None, merge_instruction=merge_instruction_for(a, b),
                                        reason=f"scorer: {shown}{refused}: merged", source="scorer")
                    continue
                if cover and _stated_words_lost(gone, kept, cover):
                    # Its strict facts are kept, but too few of its words: not shown to say nothing new.
                    refused = refused or f"; {tgt.upper()} has words the other lacks"
                    continue
                return Decision("delete", tgt, reason=f"scorer: {shown}", source="scorer")
            if action == "merge":
                if p < min_merge or (self.merge_min_similarity is not None and similarity < self.merge_min_similarity):
                    continue  # not sure enough that one entry should hold both, or below the user's floor
                return Decision("merge", None, merge_instruction=merge_instruction_for(a, b),
                                reason=f"scorer: {shown}", source="scorer")
            return Decision("preserve", None, reason=f"scorer: {shown}{refused}", source="scorer")
        raise AssertionError("preserve is always allowed")  # pragma: no cover


def _stated_words_lost(gone: str, kept: str, cover: float) -> bool:
    """Whether ``kept`` carries less than ``cover`` of the content words of ``gone``'s sentences that state
    something (neither small talk nor a question: :func:`memrefine_edge.text.stated_words`)."""
    words = stated_words(sentence_scans(gone))
    if not words:
        return False
    have = coverage_keys(extract(kept))
    return sum(w not in have for w in words) > (1.0 - cover) * len(words)


def _check_unit(name: str, value: float, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [{low:g}, 1], got {value!r}")
    return float(value)


# --- the guarded pipeline ---------------------------------------------------------


class GuardedJudge(Judge):
    """Fast path, then ``inner`` (one retry on invalid output, then preserve), then the fact guard.

    ``inner=None`` is rule-only: the fast path, otherwise preserve.
    ``min_word_cover`` is the share of content words a kept entry must carry
    (:func:`memrefine_edge.text._bindings.lost_facts`); ``merge_min_similarity``
    decides what a refused delete becomes when both entries hold facts of
    their own: merge at or above it (same event, complementary facts),
    preserve below (distinct facts). See :meth:`guard`. ``stats`` counts what
    each stage did.
    """

    def __init__(
        self,
        inner: Judge | None,
        *,
        use_fast_path: bool = True,
        min_word_cover: float = 0.75,
        merge_min_similarity: float = DEFAULT_MERGE_MIN_SIMILARITY,
        check_merges: bool = True,
        retries: int = 1,
    ) -> None:
        self.inner = inner
        self.use_fast_path = use_fast_path
        self.min_word_cover = _check_unit("min_word_cover", min_word_cover, 0.0)
        self.merge_min_similarity = _check_unit("merge_min_similarity", merge_min_similarity, -1.0)
        self.check_merges = check_merges
        self.retries = retries
        self._stats: dict[str, int] = {k: 0 for k in (
            "pairs", "rule_hits", "inner_calls", "llm_calls", "invalid_outputs", "fallbacks", "guard_overrides",
            "guard_flips", "guard_merges", "guard_preserves", "guard_merge_to_delete")}
        self.last_raw: str | None = None

    @property
    def stats(self) -> dict[str, int]:
        """What each stage did: pairs, fast-path hits, inner and model calls, invalid outputs, guard changes."""
        return self._stats

    def describe(self) -> dict[str, Any]:
        """The pipeline's settings (and the inner judge's), recorded with each run."""
        inner = self.inner.describe() if self.inner is not None else None
        return {"type": "GuardedJudge", "inner": inner, "fast_path": self.use_fast_path,
                "min_word_cover": self.min_word_cover, "merge_min_similarity": self.merge_min_similarity}

    def load(self) -> None:
        """Load the inner judge's model now."""
        if self.inner is not None:
            self.inner.load()

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        """Run the pipeline for one pair."""
        self.stats["pairs"] += 1
        if self.use_fast_path:
            hit = fast_path(a, b)
            if hit is not None:
                self.stats["rule_hits"] += 1
                return hit
        if self.inner is None:
            return Decision("preserve", None, reason="no rule applies and no judge model is configured",
                            source="rule")
        decision = self._ask(a, b, similarity)
        if decision.source == "fallback":
            return decision
        return self.guard(a, b, decision, similarity)

    def _ask(self, a: str, b: str, similarity: float) -> Decision:
        assert self.inner is not None
        last: JudgeOutputError | None = None
        for _attempt in range(1 + max(0, self.retries)):
            self.stats["inner_calls"] += 1
            if self.inner.uses_model:
                self.stats["llm_calls"] += 1
            try:
                return self.inner.decide(a, b, similarity)
            except JudgeOutputError as exc:
                self.stats["invalid_outputs"] += 1
                self.last_raw = exc.raw
                last = exc
        self.stats["fallbacks"] += 1
        return Decision("preserve", None, reason=f"judge output invalid twice; preserved ({last})"[:500],
                        source="fallback")

    def guard(self, a: str, b: str, decision: Decision, similarity: float = 1.0) -> Decision:
        """Check a judge decision against the facts of both entries.

        * delete X: applied only when the other entry covers X's facts. Else,
          if X covers the other entry, the other one is deleted (the judge
          picked the wrong side); else both hold facts of their own and the
          pair is merged -- when ``similarity >= merge_min_similarity``, i.e.
          plausibly the same event -- or preserved (distinct facts).
        * merge: with ``check_merges``, when one entry already covers the
          other the covered one is deleted instead (same facts; no merge
          call needed). The merged text itself is guarded by the merger.
        * preserve: always safe, passed through.
        """
        cover = self.min_word_cover
        if decision.action == "merge" and self.check_merges:
            for gone, kept, tgt in ((a, b, "a"), (b, a, "b")):
                if not lost_facts(gone, kept, min_word_cover=cover):
                    self.stats["guard_overrides"] += 1
                    self.stats["guard_merge_to_delete"] += 1
                    return Decision("delete", tgt,  # type: ignore[arg-type]
                                    reason=f"guard: {tgt.upper()} holds no fact the other lacks; deleted "
                                           "instead of merged", source="guard")
            return decision
        if decision.action != "delete":
            return decision
        gone, kept = (a, b) if decision.target == "a" else (b, a)
        lost = lost_facts(gone, kept, min_word_cover=cover)
        if not lost:
            return decision
        self.stats["guard_overrides"] += 1
        gone_side = (decision.target or "a").upper()
        other: Target = "b" if decision.target == "a" else "a"
        if not lost_facts(kept, gone, min_word_cover=cover):
            self.stats["guard_flips"] += 1
            return Decision("delete", other,
                            reason=f"guard: deleting {gone_side} would lose {describe(lost, gone)}; "
                                   f"{other.upper()} adds nothing, so it is deleted instead",
                            source="guard")
        if similarity < self.merge_min_similarity:
            self.stats["guard_preserves"] += 1
            return Decision("preserve", None,
                            reason=f"guard: both entries hold facts of their own (e.g. {describe(lost, gone)}) and "
                                   f"similarity {similarity:.2f} < {self.merge_min_similarity}: distinct",
                            source="guard")
        self.stats["guard_merges"] += 1
        return Decision("merge", None,
                        merge_instruction=merge_instruction_for(a, b, min_word_cover=cover),
                        reason=f"guard: deleting {gone_side} would lose {describe(lost, gone)}",
                        source="guard")
