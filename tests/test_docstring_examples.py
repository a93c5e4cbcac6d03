"""The examples in the public docstrings run (doctest), with torch and the names in scope."""

from __future__ import annotations

import doctest

import pytest
import torch

import spacl.losses
import spacl.losses.spacl
import spacl.tasks.text.states


@pytest.mark.parametrize(
    "obj",
    [spacl.losses, spacl.losses.spacl.SPACLLoss, spacl.tasks.text.states],
    ids=lambda o: getattr(o, "__name__", str(o)),
)
def test_docstring_examples_run(obj: object) -> None:
    globs = {"torch": torch, **{name: getattr(spacl.losses, name) for name in spacl.losses.__all__}}
    globs.update(vars(spacl.tasks.text.states))
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, globs=globs) if t.examples]
    assert tests, f"{obj!r} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        result = runner.run(test)
        assert result.failed == 0, f"{test.name}: {result.failed} of {result.attempted} failed"
