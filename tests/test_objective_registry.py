"""The one objective registry (:mod:`spacl.losses.registry`), used by every task and study."""

from __future__ import annotations

import pytest
import torch

from spacl.losses import HardNegativeLoss, SPACLLoss, SupConLoss
from spacl.losses.classifier import CrossEntropyObjective
from spacl.losses.kg import LinkInfoNCELoss, LinkSPACLLoss
from spacl.losses.registry import (
    OBJECTIVE_TASKS,
    REGISTRY,
    build_objective,
    objective_names,
    objective_spec,
    objectives_for,
)


def test_a_name_means_one_row_per_task() -> None:
    seen: set[tuple[str, str]] = set()
    for spec in REGISTRY:
        assert spec.tasks and set(spec.tasks) <= set(OBJECTIVE_TASKS), spec.name
        for task in spec.tasks:
            assert (task, spec.name) not in seen
            seen.add((task, spec.name))
    assert objective_spec("spacl", "kg").load() is LinkSPACLLoss
    assert objective_spec("spacl", "image").load() is SPACLLoss
    assert objective_spec("spacl", "text_finetune").defaults["positive_pool"] == "instance_class"


def test_every_task_reads_its_names_from_the_registry() -> None:
    from spacl.tasks.image import OBJECTIVES
    from spacl.tasks.kg import KG_OBJECTIVES
    from spacl.tasks.text.config import OOD_OBJECTIVES
    from spacl.tasks.text.finetune import FINETUNE_OBJECTIVES

    assert OBJECTIVES == objectives_for("image")
    assert set(OOD_OBJECTIVES) == {"spacl", "supcon", "cross_entropy", "frozen"}
    assert OOD_OBJECTIVES == objective_names("text")
    assert FINETUNE_OBJECTIVES == objective_names("text_finetune")
    assert KG_OBJECTIVES == objective_names("kg") == ("infonce", "spacl")


def test_the_studies_methods_are_rows_over_the_registry() -> None:
    from spacl.studies.alignment_study.config import ARMS
    from spacl.studies.spacl_bench.best_chance import arms
    from spacl.studies.spacl_bench.methods import BASE, baselines, spacl_method

    image = objectives_for("image")
    methods = [*baselines("supervised"), *baselines("self-supervised"), *arms()]
    methods.append(spacl_method(BASE, "supervised", 8))
    for method in methods:
        assert method.objective in image, method.name
        loss = method.build(0.2, 0)
        assert isinstance(loss, image[method.objective].load()), method.name
    assert set(ARMS.values()) <= set(image)


def test_build_merges_defaults_params_given_and_fixed() -> None:
    loss = objective_spec("hscl").build({"beta": 2.0}, given={"temperature": 0.3})
    assert isinstance(loss, HardNegativeLoss) and loss.beta == 2.0
    sup = objective_spec("supcon", "text").build({"variant": "out"}, given={"temperature": 0.1})
    assert isinstance(sup, SupConLoss) and sup.variant == "out"
    ft = objective_spec("spacl_selected", "text_finetune").build(
        {"positive_mode": "log_sum_exp"}, given={"temperature": 0.1}
    )
    assert isinstance(ft, SPACLLoss)
    ce = objective_spec("cross_entropy", "text").build({"label_smoothing": 0.1})
    assert isinstance(ce, CrossEntropyObjective) and ce.label_smoothing == 0.1
    assert objective_spec("frozen", "text").build() is None
    gen = torch.Generator().manual_seed(0)
    kg = objective_spec("infonce", "kg").build(
        given={"temperature": 1.0}, optional={"generator": gen}
    )
    assert isinstance(kg, LinkInfoNCELoss)


def test_build_objective_is_the_tasks_one_call() -> None:
    """The tasks' helper: temperature for contrastive rows only, the game seeded by ``seed``."""
    ce = build_objective("cross_entropy", "text_finetune", {}, temperature=None, seed=0)
    assert isinstance(ce, CrossEntropyObjective)  # a classifier takes no temperature
    sup = build_objective("supcon", "text", None, temperature="0.2", seed=0)
    assert isinstance(sup, SupConLoss) and sup.temperature == 0.2
    with pytest.raises(ValueError, match=r"'objective\.temperature' must be set.*supcon"):
        build_objective("supcon", "text", None, temperature=None, seed=0)
    with pytest.raises(ValueError, match=r"'objective\.name'"):
        build_objective("simclr", "kg", None, temperature=0.1, seed=0)
    assert build_objective("frozen", "text", {}, temperature=0.1, seed=0) is None
    states = []
    for seed in (3, 3, 4):
        loss = build_objective("spacl", "text_finetune", {}, temperature=0.1, seed=seed)
        assert isinstance(loss, SPACLLoss)
        states.append(loss.rng.get_state())
    assert torch.equal(states[0], states[1]) and not torch.equal(states[0], states[2])


def test_build_errors_name_the_config_key() -> None:
    with pytest.raises(
        ValueError, match=r"'objective.params.betta' is not a parameter of objective"
    ):
        objective_spec("hcl").build({"betta": 1.0})
    with pytest.raises(ValueError, match=r"'objective.params.variant' is fixed to 'out'"):
        objective_spec("supcon").build({"variant": "in"})
    with pytest.raises(ValueError, match=r"'objective.params.temperature': set it as objective"):
        objective_spec("supcon").build({"temperature": 0.1}, given={"temperature": 0.2})
    with pytest.raises(ValueError, match=r"'objective.params.x': objective 'frozen' takes no"):
        objective_spec("frozen", "text").build({"x": 1})
    with pytest.raises(ValueError, match=r"config key 'objective.name' must be one of \["):
        objective_spec("simclr", "kg")
    with pytest.raises(ValueError, match=r"config key 'objective' \(hcl\): "):
        objective_spec("hcl").build({"beta": -1.0})
    with pytest.raises(ValueError, match=r"task must be one of"):
        objectives_for("audio")


@pytest.mark.parametrize(
    ("recipe", "override", "message"),
    [
        ("text/stackoverflow_finetune_spacl", "objective.params.bogus=1", r"params\.bogus"),
        ("text/stackoverflow_frozen_spacl", "objective.params.shar=0.9", r"params\.shar"),
        ("text/stackoverflow_frozen_ce", "objective.params.share=0.9", r"params\.share"),
        ("text/stackoverflow_finetune_supcon", "objective.params.share=2.0", r"params\.share"),
        ("kg/fb15k237_infonce", "objective.params.mass=similarity", r"params\.mass"),
        ("kg/fb15k237_spacl", "objective.params.share=1.5", r"share must be in"),
    ],
)
def test_task_recipes_reject_bad_objective_params_at_config_time(
    recipe: str, override: str, message: str
) -> None:
    """text and kg recipes build their loss while validating: a bad ``objective.params``
    key fails before any data is read (it once failed after minutes of encoding)."""
    from spacl.tasks.kg.config import kg_config
    from spacl.tasks.text.config import ood_config

    load = kg_config if recipe.startswith("kg/") else ood_config
    load(recipe, [])  # the shipped recipe itself is valid
    with pytest.raises(ValueError, match=message):
        load(recipe, [override])


def test_a_text_recipe_switched_to_frozen_keeps_its_unused_params() -> None:
    """``objective.name=frozen`` on a recipe with ``objective.params`` (the frozen rows of
    the open-intent benchmarks): frozen reads none of them, so the config is valid."""
    from spacl.tasks.text.config import ood_config

    cfg = ood_config("text/stackoverflow_frozen_ce", ["objective.name=frozen"])
    assert cfg.objective.name == "frozen" and cfg.objective.params.label_smoothing is not None
