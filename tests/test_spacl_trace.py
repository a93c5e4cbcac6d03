"""Following ``pool`` from ``SPACLLoss.forward`` at run time (issue 40).

:func:`sys.setprofile` records every Python call made during one ``SPACLLoss`` call, with
the spacl files of the calling frames.  Over a few configurations (one anchor on the
dense and the compact path, every view an anchor, labels with class positives):

- once the call has left ``losses/spacl/loss.py`` for another spacl module it never comes
  back into ``loss.py`` (no helper calls the loss object), and ``forward`` is the only
  function of ``loss.py`` it runs: the class hands data on and is not called again;
- the same holds for the first (cold) call of a loss built without ``embedding_dim``,
  which builds the game's players from a frozen record (``PlayerOptions``), for one
  anchor and for every view an anchor;
- it visits only ``losses/spacl/``, ``mining/`` and, the one exception, the shared kernel
  under every objective, by design (:data:`SHARED_LEAVES`, stated in
  docs/architecture.md): the modules it visits outside the two folders are exactly
  those, ``losses/_mirror.py`` on the every-view path only, so a new leak fails and a
  leaf no longer visited fails too;
- no function it runs outside the class (outside ``loss.py`` and the methods of the
  loss's own classes) holds the loss object among its locals (its arguments on entry):
  a helper handed ``self`` reads the object's attributes, which makes no call event, so
  the first rule alone would not see it (issue 40's audit: ``one_anchor_loss(self,
  ...)`` reading ``owner.options``, ``owner.cut`` and ``owner.training`` passed).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import torch

from spacl.losses.spacl import SPACLLoss

SRC = Path(__file__).resolve().parents[1] / "src" / "spacl"
CLASS_FILE = "losses/spacl/loss.py"
#: the one exception to "inside ``losses/spacl/`` and ``mining/``": what SPACL shares with
#: every other objective, by design: the kernel, the normalisation, the symmetric matmul of
#: the every-view logits and the argument checks (docs/architecture.md)
SHARED_LEAVES = frozenset(
    {"losses/kernel.py", "losses/normalize.py", "losses/_mirror.py", "_validation.py"}
)
#: the leaf only the every-view path reaches (its logit matrix from the upper triangle)
EVERY_VIEW_LEAF = "losses/_mirror.py"
ALLOWED_FOLDERS = ("losses/spacl/", "mining/")


def _spacl_file(frame: FrameType) -> str | None:
    """The file of ``frame`` relative to ``src/spacl`` (``None`` outside it)."""
    path = Path(frame.f_code.co_filename)
    try:
        return path.resolve().relative_to(SRC).as_posix()
    except ValueError:
        return None


@dataclass
class Trace:
    """The spacl files called during one call, the names of the functions of the class
    file run (in call order), the calls back into the class file, and the functions
    outside the class that were handed the loss object (``holders``)."""

    visited: set[str] = field(default_factory=set)
    class_calls: list[str] = field(default_factory=list)
    returns: list[str] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)


def _holds(value: object, owner: type, depth: int = 1) -> bool:
    """Whether ``value`` is an ``owner`` instance, or holds one (``depth`` levels into a
    tuple, list, dict or dataclass: a bundle carrying the object counts too)."""
    if isinstance(value, owner):
        return True
    if depth <= 0:
        return False
    if isinstance(value, (tuple, list)):
        items: list[object] = list(value)
    elif isinstance(value, dict):
        items = list(value.values())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    else:
        return False
    return any(_holds(item, owner, depth - 1) for item in items)


def _own_code(owner: type) -> set[object]:
    """The code objects of the functions defined by ``owner`` and its bases (its own
    methods may hold ``self``; nothing else may)."""
    codes: set[object] = set()
    for cls in owner.__mro__:
        for attr in vars(cls).values():
            func = getattr(attr, "__func__", attr)
            if inspect.isfunction(func):
                codes.add(func.__code__)
    return codes


def trace(call: Callable[[], Any], class_file: str = CLASS_FILE, owner: type = SPACLLoss) -> Trace:
    """Run ``call`` under :func:`sys.setprofile`; a call into ``class_file`` whose stack
    holds (between it and ``call``) a frame of another spacl file is a return; a call of
    a spacl function outside ``class_file`` and ``owner``'s methods whose locals hold an
    ``owner`` instance is a holder."""
    found = Trace()
    own = _own_code(owner)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        here = _spacl_file(frame)
        if here is None:
            return
        found.visited.add(here)
        if here != class_file:
            if frame.f_code not in own:
                held = [n for n, v in frame.f_locals.items() if _holds(v, owner)]
                if held:
                    found.holders.append(f"{here}:{frame.f_code.co_name}({', '.join(held)})")
            return
        found.class_calls.append(frame.f_code.co_name)
        caller = frame.f_back
        while caller is not None:
            name = _spacl_file(caller)
            if name is not None and name != class_file:
                found.returns.append(f"{frame.f_code.co_name} called under {name}")
                return
            caller = caller.f_back

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return found


def beyond(visited: set[str]) -> set[str]:
    """The visited files outside ``losses/spacl/`` and ``mining/``."""
    return {f for f in visited if not f.startswith(ALLOWED_FOLDERS)}


def outside(visited: set[str]) -> list[str]:
    """The visited files outside ``losses/spacl/``, ``mining/`` and the shared leaves."""
    return sorted(beyond(visited) - SHARED_LEAVES)


def expected_beyond(kwargs: dict[str, Any]) -> frozenset[str]:
    """What a loss built with ``kwargs`` visits outside the two folders: the shared leaves,
    :data:`EVERY_VIEW_LEAF` on the every-view path only."""
    if kwargs.get("anchor_set") == "every_view":
        return SHARED_LEAVES
    return SHARED_LEAVES - {EVERY_VIEW_LEAF}


def test_the_tracer_sees_a_return_and_a_stray_module(tmp_path: Path) -> None:
    """Counter-example: a helper module calling back into the "class" file is a return,
    a file outside the allowed folders is reported."""
    owner = SRC / "losses" / "spacl" / "loss.py"
    helper = SRC / "losses" / "spacl" / "mining.py"
    back = {"__file__": str(owner)}
    exec(compile("def method():\n    return 1\n", str(owner), "exec"), back)
    out = {"__file__": str(helper), "method": back["method"]}
    exec(compile("def helper():\n    return method()\n", str(helper), "exec"), out)
    entry = {"__file__": str(owner), "helper": out["helper"], "method": back["method"]}
    exec(compile("def forward():\n    method()\n    return helper()\n", str(owner), "exec"), entry)
    found = trace(entry["forward"])
    assert found.returns == ["method called under losses/spacl/mining.py"]
    assert found.class_calls == ["forward", "method", "method"]
    assert found.visited == {CLASS_FILE, "losses/spacl/mining.py"}
    assert outside({"losses/base.py", "mining/pool.py", "losses/kernel.py"}) == ["losses/base.py"]
    assert beyond({"losses/base.py", "mining/pool.py", "losses/kernel.py"}) == {
        "losses/base.py",
        "losses/kernel.py",
    }


def test_the_tracer_sees_a_helper_handed_the_loss_object() -> None:
    """Counter-example (issue 40's audit): ``forward`` hands ``self`` to a helper of
    ``one_anchor.py`` whose first parameter is annotated ``options: SPACLOptions`` and
    which reads ``owner.options``, ``owner.cut`` and ``owner.training`` (attribute reads:
    no call event).  The return and class-call checks pass it; the holder check does not.
    A bundle (a tuple) carrying the object is seen as well."""
    import spacl.losses.spacl.loss as loss_module
    from spacl.losses.spacl import one_anchor

    helper_source = (
        "def one_anchor_loss(options: SPACLOptions, cut, batch, mined, game, training):\n"
        "    owner = options\n"
        "    return real(owner.options, owner.cut, batch, mined, game, owner.training)\n"
    )
    helper_globals: dict[str, Any] = {
        "SPACLOptions": object,
        "real": one_anchor.one_anchor_loss,
    }
    exec(compile(helper_source, one_anchor.__file__, "exec"), helper_globals)
    forward_source = textwrap.dedent(inspect.getsource(SPACLLoss.forward))
    handed = "objective(options, self.cut, batch, mined, game, self.training)"
    assert handed in forward_source
    forward_source = forward_source.replace(
        handed, "objective(self, self.cut, batch, mined, game, self.training)"
    )
    forward_globals = {**vars(loss_module), "one_anchor_loss": helper_globals["one_anchor_loss"]}
    exec(compile(forward_source, loss_module.__file__, "exec"), forward_globals)

    class Mutated(SPACLLoss):
        pass

    Mutated.forward = forward_globals["forward"]  # type: ignore[method-assign]
    loss = Mutated(0.2, share=0.5, embedding_dim=8, generator=torch.Generator().manual_seed(0))
    pool, _ = _batch(1)
    found = trace(lambda: loss(None, pool))
    assert found.returns == [] and found.class_calls == ["forward"]  # blind to it
    assert found.holders == ["losses/spacl/one_anchor.py:one_anchor_loss(options)"]
    assert _holds((pool, loss), SPACLLoss) and not _holds(((loss,),), SPACLLoss)
    assert not _holds(loss.options, SPACLLoss)


def _batch(seed: int, b: int = 6, v: int = 3, d: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    pool = torch.nn.functional.normalize(torch.randn(b, v, d, generator=g), dim=-1)
    labels = torch.tensor([0, 1, 0, 1, 2, 2])[:b]
    return pool.requires_grad_(), labels


#: name -> (loss keyword arguments, whether labels are passed, a file the path must visit)
CONFIGURATIONS: dict[str, tuple[dict[str, Any], bool, str]] = {
    "one_anchor_dense": ({"share": 1.0}, False, "losses/spacl/dense.py"),
    "compact": ({"share": 0.5}, False, "losses/spacl/compact.py"),
    "every_view": ({"anchor_set": "every_view", "share": 0.5}, False, "losses/spacl/every_view.py"),
    "supervised": (
        {"positive_pool": "instance_class", "share": 0.5},
        True,
        "losses/spacl/class_pool.py",
    ),
}


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_following_pool_never_returns_to_the_class(name: str) -> None:
    kwargs, with_labels, must_visit = CONFIGURATIONS[name]
    loss = SPACLLoss(
        0.2, num_positives=2, embedding_dim=8, generator=torch.Generator().manual_seed(0), **kwargs
    )
    pool, labels = _batch(1)
    loss(None, pool, labels if with_labels else None)  # the game built before the trace
    found = trace(lambda: loss(None, pool, labels if with_labels else None))
    assert found.returns == [], found.returns
    assert found.class_calls == ["forward"], found.class_calls
    assert found.holders == [], found.holders
    assert must_visit in found.visited and CLASS_FILE in found.visited, sorted(found.visited)
    assert outside(found.visited) == []
    assert beyond(found.visited) == expected_beyond(kwargs), sorted(beyond(found.visited))


#: the cold call's forms: one dynamic anchor per instance, every view an anchor
COLD_FORMS: dict[str, tuple[dict[str, Any], str]] = {
    "one_anchor": ({}, "losses/spacl/one_anchor.py"),
    "every_view": ({"anchor_set": "every_view"}, "losses/spacl/every_view.py"),
}


@pytest.mark.parametrize("form", sorted(COLD_FORMS))
def test_the_first_call_builds_the_game_without_calling_the_class(form: str) -> None:
    """The first call of a loss built without ``embedding_dim`` builds the generator and
    discriminator: traced cold, that call still runs no function of ``loss.py`` but
    ``forward`` (the players are built from the options, as data, never by calling
    back the loss object)."""
    kwargs, must_visit = COLD_FORMS[form]
    loss = SPACLLoss(
        0.2, num_positives=2, share=0.5, generator=torch.Generator().manual_seed(0), **kwargs
    )
    assert loss.adversarial is None
    pool, _ = _batch(2)
    found = trace(lambda: loss(None, pool))
    assert loss.adversarial is not None and loss.adversarial.dim == pool.shape[2]
    assert found.returns == [], found.returns
    assert found.class_calls == ["forward"], found.class_calls
    assert found.holders == [], found.holders
    assert "mining/adversarial.py" in found.visited and must_visit in found.visited
    assert outside(found.visited) == []
    assert beyond(found.visited) == expected_beyond(kwargs), sorted(beyond(found.visited))


def test_the_shared_leaves_are_exactly_what_the_paths_leave_for() -> None:
    """The exception is no wider than the paths need: over the traced configurations the
    files visited outside ``losses/spacl/`` and ``mining/`` are :data:`SHARED_LEAVES`,
    every one of them (a leaf no path reaches any more is to be dropped from the list and
    the doc)."""
    forms = [kwargs for kwargs, _, _ in CONFIGURATIONS.values()]
    forms += [kwargs for kwargs, _ in COLD_FORMS.values()]
    assert set().union(*(expected_beyond(kwargs) for kwargs in forms)) == SHARED_LEAVES
