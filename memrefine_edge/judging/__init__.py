"""Who decides a proposed pair: the fast path, the redundancy scorer, judges and mergers, their prompts."""

from __future__ import annotations

from ._choice import JudgeKind, default_judge, parse_judge_model, uses_gguf
from ._judge import FactJudge, GuardedJudge, Judge, LlamaJudge, ScorerJudge, merge_instruction_for
from ._merger import GuardedMerger, LlamaMerger, MergedEntry, Merger, build_merged_entry, concat_merge, merged_entry_id
from ._scorer import RedundancyScorer

__all__ = [
    "FactJudge", "GuardedJudge", "GuardedMerger", "Judge", "JudgeKind", "LlamaJudge", "LlamaMerger", "MergedEntry",
    "Merger", "RedundancyScorer", "ScorerJudge", "build_merged_entry", "concat_merge", "default_judge",
    "merge_instruction_for", "merged_entry_id", "parse_judge_model", "uses_gguf",
]
