"""The public API: each package's ``__all__`` is what the API reference documents, and every name has one home.

``docs/reference/api.md`` lists, per package, the names it exports (``<!-- api:names PACKAGE ... -->``);
the docs build renders them. A name exported but not documented, or documented but gone, fails here with
the exact lines to change.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API_PAGE = ROOT / "docs" / "reference" / "api.md"
STAGES = ["core", "text", "index", "backends", "store", "judging", "methods", "engine", "eval", "fleet", "cli"]
_NAMES = re.compile(r"<!-- api:names ([\w.]+)\s+([^>]*?)\s*-->", re.S)


def documented(page: Path = API_PAGE) -> dict[str, list[str]]:
    return {pkg: names.split() for pkg, names in _NAMES.findall(page.read_text(encoding="utf-8"))}


def exported(package: str) -> list[str]:
    return [n for n in importlib.import_module(package).__all__ if not n.startswith("__")]


def packages() -> list[str]:
    return ["memrefine_edge", *(f"memrefine_edge.{s}" for s in STAGES), "memrefine_edge.testing"]


def test_every_public_package_has_a_section():
    assert sorted(documented()) == sorted(packages())


@pytest.mark.parametrize("package", packages())
def test_the_documented_names_are_the_exported_names(package):
    docs, code = set(documented().get(package, [])), set(exported(package))
    assert sorted(code - docs) == [], f"exported by {package} but not listed in {API_PAGE.name}: add them"
    assert sorted(docs - code) == [], f"listed for {package} in {API_PAGE.name} but not exported: remove them"


@pytest.mark.parametrize("package", packages())
def test_every_exported_name_exists(package):
    module = importlib.import_module(package)
    assert [n for n in exported(package) if not hasattr(module, n)] == []


def test_each_name_has_one_home_stage():
    homes: dict[str, list[str]] = {}
    for stage in STAGES:
        for name in exported(f"memrefine_edge.{stage}"):
            homes.setdefault(name, []).append(stage)
    assert {n: s for n, s in homes.items() if len(s) > 1} == {}


def test_the_top_level_re_exports_only_names_of_a_stage_or_the_fakes():
    import memrefine_edge

    stage_names = {n: s for s in STAGES for n in exported(f"memrefine_edge.{s}")}
    for name in exported("memrefine_edge"):
        obj = getattr(memrefine_edge, name)
        stage = stage_names.get(name)
        assert stage is not None, f"{name} is exported at the top level but by no stage"
        assert getattr(importlib.import_module(f"memrefine_edge.{stage}"), name) is obj


def test_a_stage_s_names_are_defined_in_that_stage():
    for stage in STAGES:
        module = importlib.import_module(f"memrefine_edge.{stage}")
        for name in exported(f"memrefine_edge.{stage}"):
            obj = getattr(module, name)
            home = getattr(obj, "__module__", None)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert home is not None and home.startswith(f"memrefine_edge.{stage}"), (
                    f"memrefine_edge.{stage}.{name} is defined in {home}: export it from its own stage")


def test_the_checks_see_a_missing_name(tmp_path):
    # The page parser must read what the docs build reads, or the tests above pass vacuously.
    page = tmp_path / "api.md"
    page.write_text("<!-- api:names memrefine_edge.index\nPairQueue pair_scores\n-->\n", encoding="utf-8")
    docs = documented(page)
    assert docs == {"memrefine_edge.index": ["PairQueue", "pair_scores"]}
    assert "similarity_matrix" in set(exported("memrefine_edge.index")) - set(docs["memrefine_edge.index"])
