"""Compression methods: who decides what happens to a proposed pair.

Every method, built-in or not, is registered with :func:`register` under
its ``name`` and declares its options (:class:`MethodOption`); the
pipeline, the command line and the evaluation check and build it from the
registry. Methods from other distributions are plugins in the
:data:`ENTRY_POINT_GROUP` entry point group, loaded when their name is
first asked for. The built-ins:

* ``memrefine`` (:class:`MemRefineMethod`): the paper's judge.
* ``rulesim`` and ``rulepr``: the paper's rule baselines.
"""

from __future__ import annotations

from ._base import Method, MethodOption, PairContext
from ._memrefine import MemRefineMethod
from ._registry import ENTRY_POINT_GROUP, check_method_options, get_method, method_class, method_names, register
from ._rules import RulePR, RuleSim

__all__ = ["Method", "MethodOption", "PairContext", "MemRefineMethod", "RuleSim", "RulePR", "ENTRY_POINT_GROUP",
           "register", "get_method", "method_class", "method_names", "check_method_options"]
