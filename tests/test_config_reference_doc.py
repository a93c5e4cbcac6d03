"""docs/training.md's "Config keys" lists every key of every section of the image
config, with its default (a new-user audit found ``objective.queue_size`` and
``data.bad_images`` missing from a reference that says it lists them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from spacl.tasks.image import config as image_config

DOC = Path(__file__).resolve().parents[1] / "docs" / "training.md"
SECTIONS = {
    "data": image_config.DataConfig,
    "views": image_config.ViewsConfig,
    "model": image_config.ModelConfig,
    "objective": image_config.ObjectiveConfig,
    "optim": image_config.OptimConfig,
    "train": image_config.TrainConfig,
    "eval": image_config.EvalConfig,
    "log": image_config.LogConfig,
}


def section_text(reference: str, name: str) -> str:
    """The paragraph of ``**`name`**`` up to the next section's heading (or ``arms``)."""
    start = reference.index(f"**`{name}`**")
    heads = [reference.find(f"**`{other}`**", start + 1) for other in [*SECTIONS, "arms"]]
    return reference[start : min(h for h in heads if h > start)]


def documented(text: str, key: str) -> bool:
    """``key`` appears as a code name: `` `key` `` or inside a ``{a, key, b}`` group."""
    return f"`{key}`" in text or f" {key}," in text or f"{{{key}," in text or f" {key}}}" in text


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_the_reference_names_every_key_of_the_section(section: str) -> None:
    text = DOC.read_text()
    reference = text[text.index("## Config keys") :]
    reference = reference[: reference.index("\n## ", 1)]
    paragraph = section_text(reference, section)
    missing = [
        f.name
        for f in dataclasses.fields(SECTIONS[section])
        if not documented(paragraph, f.name)
        and not (section == "data" and f.name == "synthetic")  # its {…} keys are listed
    ]
    assert not missing, f"docs/training.md's `{section}` paragraph omits {missing}"


def test_the_check_finds_a_missing_key() -> None:
    """Counter-example: a paragraph without ``queue_size`` fails the check."""
    assert not documented("`name` [simclr]; `temperature`", "queue_size")
    assert documented("`synthetic.{num_classes, dim, samples_per_class}`", "dim")
