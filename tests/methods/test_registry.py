"""The method registry: declared options, register(), and plugins found through entry points."""

from __future__ import annotations

import importlib
import inspect
import sys
from types import MappingProxyType

import pytest

from memrefine_edge.core import (
    ConfigurationError,
    Decision,
    MethodOptionError,
    OptionConflictError,
    PluginError,
    UnknownMethodError,
)
from memrefine_edge.methods import (
    MemRefineMethod,
    Method,
    MethodOption,
    PairContext,
    RulePR,
    RuleSim,
    get_method,
    method_class,
    method_names,
    register,
)
from tests.support.plugins import THRESHOLD_SOURCE, write_plugin

# --- declared options ---------------------------------------------------------------------------


def test_an_option_reads_command_line_text_by_its_type():
    flag = MethodOption(type=bool, default=True, help="")
    assert [flag.parse("x", w) for w in ("true", "Yes", "on", "1", "false", "no", "OFF", "0")] == [True] * 4 + [
        False] * 4
    with pytest.raises(MethodOptionError, match="x must be true or false, got 'maybe'"):
        flag.parse("x", "maybe")
    count = MethodOption(type=int, default=5, low=1, help="")
    assert count.parse("k", " 7 ") == 7
    with pytest.raises(MethodOptionError, match="k must be an integer >= 1, got '2.5'"):
        count.parse("k", "2.5")
    ratio = MethodOption(type=float, default=0.5, low=0.0, high=1.0, high_open=True, help="")
    assert ratio.parse("r", "0.25") == 0.25 and isinstance(ratio.check("r", 0), float)
    for text, message in (("1", r"r must be in \[0.0, 1.0\), got 1.0"), ("nan", "r must be a number"),
                          ("a lot", "r must be a number, got 'a lot'")):
        with pytest.raises(MethodOptionError, match=message):
            ratio.parse("r", text)
    optional = MethodOption(type=int, default=None, help="")
    assert optional.parse("n", "none") is None and optional.check("n", None) is None
    word = MethodOption(type=str, default="a", choices=("a", "b"), help="")
    with pytest.raises(MethodOptionError, match="w must be one of a, b, got 'c'"):
        word.parse("w", "c")


def test_an_option_declaration_is_checked_where_it_is_written():
    with pytest.raises(TypeError, match="bool, int, float or str"):
        MethodOption(type=list, default=[], help="")
    with pytest.raises(MethodOptionError, match="default must be in"):
        MethodOption(type=float, default=2.0, low=0.0, high=1.0, help="")
    with pytest.raises(TypeError, match="only a str option has choices"):
        MethodOption(type=int, default=1, choices=("1",), help="")
    assert MethodOption(type=float, default=0.85, low=0.0, high=1.0, low_open=True, high_open=True,
                        help="").describe() == "number in (0.0, 1.0), default 0.85"


@pytest.mark.parametrize("cls", [MemRefineMethod, RuleSim, RulePR])
def test_a_built_in_declares_every_keyword_of_its_constructor_with_the_same_default(cls):
    params = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
              if p.kind is p.KEYWORD_ONLY and name != "judge"}
    assert params == {name: option.default for name, option in cls.options.items()}


def test_the_built_ins_are_registered_through_register_like_any_method():
    assert {"memrefine", "rulesim", "rulepr"} <= set(method_names())
    assert register(RuleSim) is RuleSim and method_class("rulesim") is RuleSim  # again: nothing changes

    class Impostor(Method):
        name = "rulesim"

        def decide(self, pair: PairContext) -> Decision:
            raise AssertionError

    with pytest.raises(ConfigurationError, match="'rulesim' is taken by memrefine_edge.methods._rules.RuleSim"):
        register(Impostor)
    assert method_class("rulesim") is RuleSim


def test_register_refuses_what_is_not_a_method_with_declared_options():
    with pytest.raises(TypeError, match="not a Method subclass"):
        register(dict)  # type: ignore[arg-type]

    class Nameless(Method):
        def decide(self, pair: PairContext) -> Decision:
            raise AssertionError

    with pytest.raises(ValueError, match="Nameless has no name"):
        register(Nameless)

    class Loose(Nameless):
        name = "test-loose"
        options = MappingProxyType({"k": 3})  # type: ignore[dict-item]

    with pytest.raises(TypeError, match=r"Loose.options\['k'\] is not a MethodOption"):
        register(Loose)

    class Judged(Nameless):
        name = "test-judged"
        options = MappingProxyType({"judge": MethodOption(type=str, default="x", help="")})

    with pytest.raises(ValueError, match="'judge' cannot name an option"):
        register(Judged)
    assert "test-loose" not in method_names() and "test-judged" not in method_names()


def test_a_method_is_checked_built_and_recorded_from_its_declaration():
    @register
    class Keep(Method):
        name = "test-keep"
        options = MappingProxyType({"level": MethodOption(type=int, default=2, low=0, high=9, help="")})

        def __init__(self, *, level: int = 2) -> None:
            self.level = level

        def decide(self, pair: PairContext) -> Decision:
            return Decision("preserve", None, reason=f"level {self.level}", source="rule")

    method = get_method("test-keep", level=7)
    assert isinstance(method, Keep) and method.level == 7 and method.describe() == {"level": 7}
    assert get_method("test-keep").describe() == {"level": 2}  # every option recorded, defaults too
    assert Keep(level=3).describe() == {}  # built directly: nothing recorded unless it overrides describe()
    with pytest.raises(MethodOptionError, match=r"level must be in \[0, 9\], got 10"):
        get_method("test-keep", level=10)
    with pytest.raises(OptionConflictError, match=r"method 'test-keep' has no option 'lvl' \(its options: level\)"):
        get_method("test-keep", lvl=1)
    with pytest.raises(OptionConflictError, match="decides without a judge"):
        get_method("test-keep", judge=object())  # type: ignore[arg-type]


def test_memrefine_builds_its_default_judge_when_none_is_given():
    method = get_method("memrefine")  # once a TypeError: the judge was required
    assert method.describe()["judge"]["inner"]["type"] == "ScorerJudge" and method.llm_calls == 0
    assert MemRefineMethod().describe()["keep_last_copies"] is True


def test_an_unknown_method_is_named_with_the_known_ones():
    with pytest.raises(UnknownMethodError, match="unknown method 'nope'; known: .*memrefine, rulepr, rulesim"):
        get_method("nope")


# --- plugins -------------------------------------------------------------------------------------


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path where tests install plugin distributions."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    importlib.invalidate_caches()


def _forget(monkeypatch, module: str) -> None:
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_a_plugin_is_found_by_name_and_loaded_only_when_asked_for(site, monkeypatch):
    write_plugin(site, dist="acme-methods", module="acme_cut_lazy",
                 entry_points={"acme-lazy": "acme_cut_lazy:CutMethod"}, source=THRESHOLD_SOURCE.format(name="acme-lazy"))
    _forget(monkeypatch, "acme_cut_lazy")
    assert "acme-lazy" in method_names() and "acme_cut_lazy" not in sys.modules  # listed, not imported
    method = get_method("acme-lazy", cut=0.9)
    assert "acme_cut_lazy" in sys.modules and method.name == "acme-lazy" and method.describe() == {
        "cut": 0.9, "label": "acme"}
    assert method_class("acme-lazy") is type(method)  # registered now: loaded once
    with pytest.raises(MethodOptionError, match=r"cut must be in \[0.0, 1.0\], got 2"):
        get_method("acme-lazy", cut=2)


def test_a_plugin_module_may_register_its_method_itself(site, monkeypatch):
    source = THRESHOLD_SOURCE.format(name="acme-self") + "\nfrom memrefine_edge.methods import register\n" \
                                                         "register(CutMethod)\n"
    write_plugin(site, dist="acme-self", module="acme_self", entry_points={"acme-self": "acme_self"}, source=source)
    _forget(monkeypatch, "acme_self")
    assert get_method("acme-self").decide.__qualname__ == "CutMethod.decide"


@pytest.mark.parametrize("source, value, message", [
    ("import acme_missing_dependency\n", "acme_broken:Thing",
     r"method plugin 'acme-broken' \(acme_broken:Thing from acme-broken 1.0\) failed to load: "
     r"ModuleNotFoundError: No module named 'acme_missing_dependency'$"),
    ("raise RuntimeError('no licence\\nsecond line')\n", "acme_broken:Thing",
     r"failed to load: RuntimeError: no licence$"),
    ("Thing = 42\n", "acme_broken:Thing", r"is neither a Method subclass nor a module that registers one"),
    ("", "acme_broken:Thing", r"failed to load: AttributeError"),
    (THRESHOLD_SOURCE.format(name="another-name").replace("CutMethod", "Thing"), "acme_broken:Thing",
     r"names its method 'another-name': the entry point's name must be the method's name"),
])
def test_a_broken_plugin_is_one_plugin_error_naming_it(site, monkeypatch, source, value, message):
    write_plugin(site, dist="acme-broken", module="acme_broken", entry_points={"acme-broken": value}, source=source)
    _forget(monkeypatch, "acme_broken")
    with pytest.raises(PluginError, match=message) as info:
        get_method("acme-broken")
    assert "\n" not in str(info.value)
    with pytest.raises(PluginError):  # nothing was half-registered: asked again, it fails again
        method_class("acme-broken")
    get_method("rulesim")  # the others still work


def test_two_plugins_naming_one_method_are_refused(site, monkeypatch):
    for dist in ("acme-one", "acme-two"):
        module = dist.replace("-", "_")
        write_plugin(site / dist, dist=dist, module=module, entry_points={"acme-twice": f"{module}:CutMethod"},
                     source=THRESHOLD_SOURCE.format(name="acme-twice"))
        monkeypatch.syspath_prepend(str(site / dist))
    with pytest.raises(PluginError, match="'acme-twice' is named by several plugins .*acme-one.*acme-two|"
                                          "'acme-twice' is named by several plugins .*acme-two.*acme-one"):
        get_method("acme-twice")


def test_a_plugin_cannot_take_a_built_in_name(site, monkeypatch):
    write_plugin(site, dist="acme-rulesim", module="acme_rulesim", entry_points={"rulesim": "acme_rulesim:CutMethod"},
                 source=THRESHOLD_SOURCE.format(name="rulesim"))
    _forget(monkeypatch, "acme_rulesim")
    assert method_class("rulesim") is RuleSim and "acme_rulesim" not in sys.modules
