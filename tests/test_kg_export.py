"""``spacl export`` of KG runs: the link predictor leaves its run directory.

The exported folder is used by the code of its own README in a process that never
imports spacl (plain torch), and must give the run's scores for every answer of head and
tail queries, ranked as ``spacl predict`` ranks them (unfiltered).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from readme_code import run_readme_code
from spacl.cli import main
from spacl.models.kg import LinkPredictor
from spacl.tasks.kg.export import export_link_model
from spacl.tasks.kg.run import LinkModel, load_link_model
from test_task_runs import kg_run  # noqa: F401  (the fixture: a tiny trained KG run)


def test_an_exported_link_predictor_scores_every_answer_as_the_run_does(
    kg_run: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "link"
    assert main(["export", str(kg_run), "--out", str(folder)]) == 0
    link = load_link_model(kg_run)
    kg = link.kg
    tables = torch.load(folder / "embeddings.pt", weights_only=True)
    assert torch.equal(tables["entity"], link.model.entity.weight.detach())
    assert torch.equal(tables["relation"], link.model.relation.weight.detach())
    assert tables["relation"].shape[0] == 2 * kg.num_relations  # reciprocals included
    meta = json.loads((folder / "link.json").read_text())
    assert meta["entities"] == kg.entities.names and meta["relations"] == kg.relations.names
    assert meta["kind"] == link.model.kind and meta["num_relations"] == kg.num_relations
    summary = json.loads((kg_run / "summary.json").read_text())
    assert meta["test"] == summary.get("test")

    n = kg.num_entities
    queries = []
    for h, r, t in kg.train[:4].tolist():  # the run keeps its training triples
        rel = kg.relations.names[r]
        queries.append({"relation": rel, "head": kg.entities.names[h], "top": n})
        queries.append({"relation": rel, "tail": kg.entities.names[t], "top": n})
    got = run_readme_code(folder, f"[predict(**q) for q in {queries!r}]", tmp_path)
    for query, answers in zip(queries, got, strict=True):
        expected = {name: score for name, _, score in link.predict(**query)}
        assert len(answers) == n == len(expected)
        for name, score in answers:  # every answer's score, float32 rounding apart
            assert score == pytest.approx(expected[name], rel=1e-5, abs=1e-6)
        scores = [score for _, score in answers]
        assert scores == sorted(scores, reverse=True)  # best first
        top = link.predict(**{**query, "top": 1})[0]
        assert answers[0][1] == pytest.approx(top[2], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(("kind", "normalize"), [("distmult", True), ("complex", True)])
def test_the_readme_code_scores_every_interaction_and_normalisation(
    kg_run: Path,  # noqa: F811
    tmp_path: Path,
    kind: str,
    normalize: bool,
) -> None:
    """The README's scorer against the model for the variants the trained run lacks."""
    link = load_link_model(kg_run)
    kg = link.kg
    torch.manual_seed(3)
    model = LinkPredictor(
        kg.num_entities, 2 * kg.num_relations, 8, kind, init_scale=0.5, normalize=normalize
    ).eval()
    other = LinkModel(link.config, kg, model)
    folder = export_link_model(other, tmp_path / "link")
    h, r, t = kg.train[0].tolist()  # the run keeps the training triples (graph.pt)
    rel = kg.relations.names[r]
    queries = [
        {"relation": rel, "head": kg.entities.names[h], "top": kg.num_entities},
        {"relation": rel, "tail": kg.entities.names[t], "top": kg.num_entities},
    ]
    got = run_readme_code(folder, f"[predict(**q) for q in {queries!r}]", tmp_path)
    for query, answers in zip(queries, got, strict=True):
        assert len(answers) == kg.num_entities
        expected = {name: score for name, _, score in other.predict(**query)}
        for name, score in answers:
            assert score == pytest.approx(expected[name], rel=1e-5, abs=1e-6)


def test_export_of_a_kg_run_refuses_a_folder_in_use(
    kg_run: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    assert main(["export", str(kg_run), "--out", str(used)]) == 2
    assert "--out must be a new or empty folder" in capsys.readouterr().err
    assert (used / "keep.txt").read_text() == "mine"
