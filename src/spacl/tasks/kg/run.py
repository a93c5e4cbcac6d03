"""A finished KG run, used: ranked answers to ``(h, r, ?)`` / ``(?, r, t)`` and re-evaluation.

:func:`load_link_model` rebuilds the :class:`~spacl.models.kg.LinkPredictor` of a run
directory (:mod:`spacl.engine.rundir`) from its checkpoint (the best validation epoch) and
the entity and relation names and training triples the run saved (``graph.pt``,
:func:`spacl.data.kg.write_graph_vocabulary`): predicting, exporting and loading need no
dataset.  Only :func:`evaluate_kg_run` reads the dataset again (its valid and test
triples).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import Tensor

from spacl.data.kg import GRAPH_FILE, KnowledgeGraph, load_kg, read_graph_vocabulary
from spacl.engine.rundir import read_task_checkpoint, run_config
from spacl.models.kg import LinkPredictor
from spacl.schema_files import named_field
from spacl.tasks.kg.config import kg_config

__all__ = ["LinkModel", "evaluate_kg_run", "load_link_model"]


@dataclass
class LinkModel:
    """A trained link predictor with its graph's vocabularies."""

    config: DictConfig
    kg: KnowledgeGraph
    model: LinkPredictor

    def __repr__(self) -> str:  # what it is, not the config, names and weights
        return (
            f"LinkModel({named_field(self.config)}graph={self.kg.name!r}, "
            f"entities={self.kg.num_entities}, relations={self.kg.num_relations}, "
            f"model={self.model.kind!r}, dim={self.model.dim})"
        )

    def entity_id(self, name_or_id: str | int) -> int:
        """The id of an entity given by name, or by id (an int or a digit string)."""
        return _lookup(self.kg.entities.ids, self.kg.num_entities, name_or_id, "entity")

    def relation_id(self, name_or_id: str | int) -> int:
        """The id of a relation given by name, or by id (an int or a digit string)."""
        return _lookup(self.kg.relations.ids, self.kg.num_relations, name_or_id, "relation")

    @torch.no_grad()
    def embed(self, entities: Sequence[str | int]) -> Tensor:
        """``[N, d]`` embeddings ``g(e)`` of entities given by name or id."""
        ids = torch.tensor([self.entity_id(e) for e in entities], dtype=torch.long)
        return self.model.entities(ids).float()

    @torch.no_grad()
    def scores(self, relation: str | int, head: str | int | None, tail: str | int | None) -> Tensor:
        """``[E]`` scores of every answer to ``(head, relation, ?)`` or ``(?, relation, tail)``.

        A head query uses the reciprocal relation ``r + R``, as training and evaluation do.
        """
        if (head is None) == (tail is None):
            raise ValueError("give exactly one of head and tail")
        r = self.relation_id(relation)
        if head is not None:
            h = self.entity_id(head)
        else:
            assert tail is not None
            h, r = self.entity_id(tail), r + self.kg.num_relations
        self.model.eval()
        return self.model(torch.tensor([h]), torch.tensor([r]))[0]

    def predict(
        self,
        relation: str | int,
        *,
        head: str | int | None = None,
        tail: str | int | None = None,
        top: int = 10,
        filtered: bool = False,
    ) -> list[tuple[str, int, float]]:
        """The ``top`` answers ``(name, id, score)``, best first (ties: smaller id first).

        ``filtered``: answers that complete a known *training* triple are left out.
        """
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f"top must be an int >= 1, got {top!r}")
        s = self.scores(relation, head, tail).double()
        if filtered:
            query = self.entity_id(head if head is not None else tail)  # type: ignore[arg-type]
            r = self.relation_id(relation) + (0 if head is not None else self.kg.num_relations)
            index = self.kg.train_index()
            known = index.mask(torch.tensor([query]), torch.tensor([r]))[0]
            s = s.masked_fill(known, float("-inf"))
        order = torch.sort(-s, stable=True).indices[: min(top, s.numel())]
        names = self.kg.entities.names
        return [(names[i], int(i), float(s[i])) for i in order.tolist() if s[i] > float("-inf")]


def _lookup(ids: dict[str, int], size: int, key: str | int, what: str) -> int:
    if isinstance(key, str) and key in ids:
        return ids[key]
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        value = int(key)
        if 0 <= value < size:
            return value
        raise ValueError(f"{what} id {value} is outside [0, {size})")
    raise ValueError(f"unknown {what} {key!r} (not a name in the graph, nor an id)")


def load_link_model(run_dir: str | Path, kg: KnowledgeGraph | None = None) -> LinkModel:
    """The best-epoch link predictor of a KG run directory.

    ``kg``: the graph, if loaded; otherwise the run's ``graph.pt`` (names and training
    triples, no valid or test), or for a run written before it the dataset its config
    names."""
    raw = run_config(run_dir)
    if raw.get("task") != "kg":
        raise ValueError(f"{run_dir} is a run of task {raw.get('task', 'image')!r}, not 'kg'")
    state = read_task_checkpoint(run_dir, "kg")
    cfg = kg_config(raw)  # the KG schema, the loader load_recipe dispatches to
    if kg is None:
        saved = Path(run_dir) / GRAPH_FILE
        kg = read_graph_vocabulary(saved) if saved.is_file() else _dataset_of(cfg)
    from spacl.tasks.kg.train import best_weights, build_link_predictor

    model = build_link_predictor(cfg, kg)
    weights = best_weights(state)
    if weights is None:
        raise ValueError(f"{run_dir}: the run has not validated an epoch yet (no best weights)")
    model.load_state_dict(weights)
    model.eval()
    return LinkModel(cfg, kg, model)


def _dataset_of(cfg: DictConfig) -> KnowledgeGraph:
    return load_kg(str(cfg.data.name), cfg.data.root, unseen=str(cfg.data.unseen))


def evaluate_kg_run(
    run_dir: str | Path, kg: KnowledgeGraph | None = None, *, data_root: str | None = None
) -> dict[str, Any]:
    """Filtered test (and full validation) ranking metrics of a run's checkpoint, on the
    dataset its config names (``kg``: that graph, if loaded; ``data_root``: where it is
    now, if it moved since training); its names must be the run's own."""
    from spacl.evaluate.ranking import evaluate_link_prediction

    if kg is None:
        moved = [f"data.root={data_root}"] if data_root is not None else []
        kg = _dataset_of(kg_config(run_config(run_dir), moved))
    saved = Path(run_dir) / GRAPH_FILE
    if saved.is_file():
        own = read_graph_vocabulary(saved)
        if own.entities.names != kg.entities.names or own.relations.names != kg.relations.names:
            raise ValueError(
                f"{run_dir}: the dataset's entity or relation names differ from the run's "
                f"({GRAPH_FILE}); evaluate on the graph the run was trained on"
            )
    link = load_link_model(run_dir, kg)
    cfg, graph = link.config, link.kg
    filter_index = graph.filter_index()
    out: dict[str, Any] = {}
    for split in ("valid", "test"):
        out[split] = evaluate_link_prediction(
            link.model,
            graph.split(split),
            graph.num_relations,
            filter_index,
            batch_size=int(cfg.eval.batch_size),
            ties=str(cfg.eval.ties),
            progress=cfg.train.progress,
        )
    return out
