"""Text understanding without a model: the fact extractor, small talk, word lists, the last-copy index."""

from __future__ import annotations

from ._bindings import binding_losses, describe, lost_facts, surface_forms
from ._facts import (
    TEXT_CACHE,
    Facts,
    coverage_keys,
    covers,
    extract,
    fact_sentences,
    is_filler,
    missing_facts,
    normalise,
    sentence_scans,
    stated_words,
    strip_speaker,
)
from ._lastcopy import LastCopies, specific_keys
from ._openings import only_small_talk, opens_as_small_talk
from ._smalltalk import SmallTalkModel, is_small_talk

__all__ = [
    "Facts", "LastCopies", "SmallTalkModel", "TEXT_CACHE", "binding_losses", "coverage_keys", "covers",
    "describe", "extract", "fact_sentences", "is_filler", "is_small_talk", "lost_facts", "missing_facts",
    "normalise", "only_small_talk", "opens_as_small_talk", "sentence_scans", "specific_keys", "stated_words",
    "strip_speaker", "surface_forms",
]
