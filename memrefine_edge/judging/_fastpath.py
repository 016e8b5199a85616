"""Decisions that need no judge: the rules a compression run applies before it asks one.

A pair of exact or normalised duplicates, a text contained word for word in the other, or small talk
(:func:`memrefine_edge.text._facts.is_filler`) is decided here, at the cost of a string comparison and the
fact extractor's cached scan; everything else goes to the judge. Containment deletes only when the
container states the contained text's facts as they are bound there
(:func:`memrefine_edge.text._bindings.binding_losses`): ``"I like dogs"`` is contained in ``"I don't think I
like dogs"``, ``"gate 7"`` in ``"gate 7.5"``, and neither is stated by it. The judges' guards
(:class:`memrefine_edge.judging._judge.GuardedJudge`) call :func:`fast_path` first.
"""

from __future__ import annotations

from memrefine_edge.core import Decision
from memrefine_edge.text import binding_losses, is_filler, normalise, only_small_talk

__all__ = ["fast_path"]


def _contained(small: str, big: str) -> bool:
    # Whole-word containment of the normalised texts; the speaker prefix of
    # the container may precede (``"I went"`` is in ``"Caroline: I went"``).
    if not small:
        return True
    return f" {small} " in f" {big} "


def fast_path(a: str, b: str, *, classify: bool = False) -> Decision | None:
    """Decisions that need no judge, or None when a judge must decide.

    In order: exact duplicate; normalised duplicate (case, punctuation,
    whitespace: the same words in the same order); one text contained in the
    other (delete the contained one, when the other states its facts bound as
    they are: :func:`memrefine_edge.text._bindings.binding_losses`);
    both pure small talk (delete the shorter); one pure small talk and the
    other not (delete the small talk -- it carries no fact by definition).
    Small talk is the word lists' (greetings, thanks, praise), in sentences that
    all open as small talk does (:func:`memrefine_edge.text.only_small_talk`);
    ``classify=True`` takes the learned classifier's calls instead
    (:mod:`memrefine_edge.text._smalltalk`), which the judge does not: it calls
    some fact sentences small talk.
    """
    if a == b:
        return Decision("delete", "b", reason="exact duplicate", source="rule")
    na, nb = normalise(a), normalise(b)
    if na == nb:
        # Keep the better-formatted copy: the one with more capitals and punctuation.
        richer_a = sum(not c.isalnum() and not c.isspace() for c in a) + sum(c.isupper() for c in a)
        richer_b = sum(not c.isalnum() and not c.isspace() for c in b) + sum(c.isupper() for c in b)
        return Decision("delete", "a" if richer_a < richer_b else "b",
                        reason="duplicate up to case, punctuation and whitespace", source="rule")
    if _contained(na, nb) and not binding_losses(a, b):
        return Decision("delete", "a", reason="entry A is contained in entry B", source="rule")
    if _contained(nb, na) and not binding_losses(b, a):
        return Decision("delete", "b", reason="entry B is contained in entry A", source="rule")
    # The word lists' small talk, but only where every sentence opens as small talk does: "She loved
    # both." and "Jae-won PASSED!" hold no fact word, yet state something (text.only_small_talk).
    fa, fb = ((is_filler(x, classify=True) if classify else only_small_talk(x)) for x in (a, b))
    if fa and fb:
        return Decision("delete", "a" if len(a) <= len(b) else "b",
                        reason="both entries are greetings, thanks or small talk", source="rule")
    if fa:
        return Decision("delete", "a", reason="entry A is only greetings, thanks or small talk", source="rule")
    if fb:
        return Decision("delete", "b", reason="entry B is only greetings, thanks or small talk", source="rule")
    return None
