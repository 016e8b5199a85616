"""Similarity and the pair queue: which pair of live entries is proposed next."""

from __future__ import annotations

from ._int8mm import int8_products
from ._local import LocalPairs
from ._pairs import PairQueue
from ._screen import row_norms, screen_scores
from ._similarity import pair_scores, similarity_matrix

__all__ = ['LocalPairs', 'PairQueue', 'int8_products', 'pair_scores', 'row_norms', 'screen_scores',
           'similarity_matrix']
