"""The examples in the public docstrings run (doctest) as a user would paste them: each
imports what it uses (``torch``, the package's names), with nothing injected."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest
import torch

import spacl.alignment
import spacl.evaluate
import spacl.geometry
import spacl.losses
import spacl.losses.kg
import spacl.losses.spacl
import spacl.mining
import spacl.tasks.text.states


def run_examples(obj: object, label: str, min_examples: int = 1) -> None:
    """Run every ``>>>`` example in ``obj``'s own docstring with empty globals (as in a
    fresh interpreter: the example imports ``torch`` and the names it uses), seeded, the
    global RNG restored; fail if there is none, or fewer than ``min_examples`` lines, or
    one fails."""
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, globs={}) if t.examples]
    assert tests, f"{label} has no example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for test in tests:
            result = runner.run(test)
            assert result.failed == 0, f"{test.name}: {result.failed} of {result.attempted} failed"
            assert result.attempted >= min_examples, f"{test.name}: {result.attempted} lines"


@pytest.mark.parametrize(
    "obj",
    [spacl.losses, spacl.losses.spacl.SPACLLoss, spacl.tasks.text.states],
    ids=lambda o: getattr(o, "__name__", str(o)),
)
def test_docstring_examples_run(obj: object) -> None:
    run_examples(obj, getattr(obj, "__name__", str(obj)))


@pytest.mark.parametrize("name", spacl.losses.__all__)
def test_every_public_loss_has_an_example_that_runs(name: str) -> None:
    """Issue 38: every loss (and the kernel, the normaliser, the base class) shows a
    runnable example."""
    run_examples(getattr(spacl.losses, name), f"spacl.losses.{name}")


def test_the_losses_overview_names_every_public_name() -> None:
    """Issue 38: the ``spacl.losses`` overview lists every public name of ``spacl.losses``
    and ``spacl.losses.kg`` (a new loss not listed there fails here)."""
    overview = spacl.losses.__doc__ or ""
    public = [*spacl.losses.__all__, *spacl.losses.kg.__all__]
    missing = [name for name in public if f"``{name}``" not in overview]
    assert not missing, f"the spacl.losses overview does not list {missing}"


#: public modules' classes that are bases of losses, not losses (nothing a user calls)
LOSS_BASES = {"LazyGameModule"}


def test_every_loss_module_of_the_package_is_public_in_the_overview() -> None:
    """Issue 38: a loss public in any module of ``spacl.losses`` (its ``__all__``, or its
    public names where it has none) is a name of ``spacl.losses`` or ``spacl.losses.kg``,
    so the overview and the example tests above reach it (``CrossEntropyObjective`` once
    escaped both)."""
    import importlib
    import pkgutil

    public = {*spacl.losses.__all__, *spacl.losses.kg.__all__}
    found = set()
    for info in pkgutil.walk_packages(spacl.losses.__path__, "spacl.losses."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        for name in names:
            obj = getattr(module, name)
            if (
                isinstance(obj, type)
                and issubclass(obj, torch.nn.Module)
                and obj.__module__ == module.__name__
            ):
                found.add(name)
    assert "CrossEntropyObjective" in found and "SPACLLoss" in found
    assert not found - public - LOSS_BASES, f"public losses outside the overview: {found - public}"


#: the losses of ``spacl.losses.kg.__all__`` (its other names are the variants, the
#: weightings and the diagnostics record)
KG_LOSSES = [
    name
    for name in spacl.losses.kg.__all__
    if isinstance(getattr(spacl.losses.kg, name), type)
    and issubclass(getattr(spacl.losses.kg, name), torch.nn.Module)
]


def test_the_kg_losses_are_all_doctested() -> None:
    assert {"LinkInfoNCELoss", "LinkSPACLLoss"} <= set(KG_LOSSES)


@pytest.mark.parametrize("name", KG_LOSSES)
def test_every_public_link_loss_has_an_example_that_runs(name: str) -> None:
    """Issue 38: the link-prediction losses of ``spacl.losses.kg`` show runnable examples."""
    obj = getattr(spacl.losses.kg, name)
    run_examples(obj, f"spacl.losses.kg.{name}", min_examples=3)


def test_the_cut_sort_path_example_runs() -> None:
    from spacl.mining.cut import exact

    (test,) = doctest.DocTestFinder(recurse=False).find(exact.sorted_prefixes, globs={})
    assert test.examples
    result = doctest.DocTestRunner().run(test)
    assert result.failed == 0 and result.attempted == len(test.examples)


def test_the_cut_select_example_runs() -> None:
    """Issue 40: the one entry point's example (every form, the value check) runs."""
    from spacl.mining.cut import RelativeThresholdNegatives

    run_examples(RelativeThresholdNegatives.select, "RelativeThresholdNegatives.select", 8)


#: the packages whose every public name shows a runnable example (audit item 16)
EXAMPLE_PACKAGES = [spacl.geometry, spacl.alignment, spacl.evaluate, spacl.mining]

#: ``"package.name": reason`` for a public name that has no example of its own; only a
#: record or an alias with nothing to run may be listed (none is, at present)
EXAMPLE_EXEMPT: dict[str, str] = {}


@pytest.mark.parametrize(
    ("package", "name"),
    [(pkg, name) for pkg in EXAMPLE_PACKAGES for name in pkg.__all__],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_every_public_metric_evaluator_and_miner_has_an_example_that_runs(
    package: ModuleType, name: str
) -> None:
    """Audit 16: every name of ``spacl.geometry``, ``spacl.alignment``, ``spacl.evaluate``
    and ``spacl.mining`` shows a ``>>>`` example that runs on its own (empty globals)."""
    qualified = f"{package.__name__}.{name}"
    if qualified in EXAMPLE_EXEMPT:
        pytest.skip(EXAMPLE_EXEMPT[qualified])
    run_examples(getattr(package, name), qualified)


def test_the_example_exemptions_are_public_names() -> None:
    """An exemption for a name that left ``__all__`` (or gained an example) is stale."""
    public = {f"{pkg.__name__}.{n}" for pkg in EXAMPLE_PACKAGES for n in pkg.__all__}
    assert set(EXAMPLE_EXEMPT) <= public


#: the packages whose docstring examples plain doctest runs, module by module (the audit:
#: ``pytest --doctest-modules src/spacl/losses ...``); and ``spacl.tasks.text.states``
DOCTEST_PACKAGES = [*EXAMPLE_PACKAGES, spacl.losses]


def doctest_modules() -> list[str]:
    """Every module of :data:`DOCTEST_PACKAGES` (sub-packages included), and the states."""
    names = []
    for package in DOCTEST_PACKAGES:
        names.append(package.__name__)
        prefix = f"{package.__name__}."
        names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]
    return sorted({*names, spacl.tasks.text.states.__name__})


def test_plain_doctest_covers_the_packages() -> None:
    """The module walk reaches the sub-packages (a walk that finds nothing passes vacuously)."""
    names = doctest_modules()
    for expected in ("spacl.losses.kg.spacl", "spacl.losses.base", "spacl.mining.cut.exact"):
        assert expected in names


@pytest.mark.parametrize("globs", ["module", "empty"])
@pytest.mark.parametrize("name", doctest_modules())
def test_plain_doctest_passes(name: str, globs: str) -> None:
    """The audit: ``doctest.testmod`` of every module, unseeded, with nothing injected:
    with the module's own globals (as ``pytest --doctest-modules``) and with empty ones
    (an example pasted into a fresh interpreter).  The global RNG is restored after."""
    module = importlib.import_module(name)
    namespace: dict[str, object] | None = None if globs == "module" else {}
    with torch.random.fork_rng(devices=[]):
        result = doctest.testmod(module, globs=namespace, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} failed"


@pytest.mark.parametrize("name", ["load", "load_recipe", "run_recipe"])
def test_every_top_level_function_has_an_example_that_runs(name: str) -> None:
    """The functions ``help(spacl)`` lists show an example (a two-step digits run for
    ``load`` and ``run_recipe``), none skipped; ``test_cli_paper_cuts`` runs them all
    under doctest (``doctest.testmod(spacl)``), so they are not trained twice here."""
    function = getattr(spacl, name)
    doc = function.__doc__ or ""
    assert "+SKIP" not in doc and doc.count(">>> ") >= 2, doc
