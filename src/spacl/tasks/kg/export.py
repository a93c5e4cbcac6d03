"""``spacl export`` of a KG run: the link predictor as a folder that runs without spacl.

The folder (:func:`export_link_model`) holds:

- ``embeddings.pt``: ``{"entity": [E, d], "relation": [2R, d]}`` float32 tensors (the
  run's best-epoch tables; row ``r + R`` is the reciprocal of relation ``r``, which
  answers head queries ``(?, r, t)`` as ``(t, r + R, ?)``), read with
  ``torch.load(..., weights_only=True)``;
- ``link.json``: the interaction (``complex`` or ``distmult``), whether embeddings are
  normalised, ``num_entities``, ``num_relations`` (``R``), the entity and relation names
  (the index is the id) and the run's filtered test metrics where it has them;
- ``README.md``: the ~25 lines of plain torch that score and rank answers (the same code
  the tests run in a process that never imports spacl).

The scores are :meth:`spacl.models.kg.LinkPredictor.forward`'s (eval mode)::

    score(h, r, e) = < f(h, r), g(e) >,   f(h, r) = combine(E[h], R[r]),   g(e) = E[e]
    distmult: combine(a, b) = a * b
    complex:  combine(a, b) = (a_re b_re - a_im b_im, a_re b_im + a_im b_re)  (halves of d)

(``f`` and ``g`` L2-normalised when the model normalises).  The ranking is unfiltered: the
folder has no graph, so answers that complete known triples are ranked too (``spacl predict
--filter`` leaves out the training triples).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from spacl._validation import check_export_folder
from spacl.tasks.kg.run import LinkModel, load_link_model

#: what ``spacl export`` writes for a KG run, for the --out check
_EXPORTED_AS = ("a KG run", "entity and relation tables, names, README.md")

__all__ = ["USAGE", "export_kg_run", "export_link_model"]

#: the code of the folder's README (``{folder}``: the folder's path), run by the tests
USAGE = '''import json, torch
import torch.nn.functional as F

folder = {folder!r}
meta = json.load(open(f"{{folder}}/link.json", encoding="utf-8"))
tables = torch.load(f"{{folder}}/embeddings.pt", weights_only=True)
E, R = tables["entity"], tables["relation"]
entity_id = {{name: i for i, name in enumerate(meta["entities"])}}
relation_id = {{name: i for i, name in enumerate(meta["relations"])}}


def query(h, r):
    """f(h, r): the query embedding of head id h under relation id r (r + R: reciprocal)."""
    a, b = E[h], R[r]
    if meta["kind"] == "complex":
        k = a.shape[0] // 2
        a_re, a_im, b_re, b_im = a[:k], a[k:], b[:k], b[k:]
        a = torch.cat((a_re * b_re - a_im * b_im, a_re * b_im + a_im * b_re))
    else:
        a = a * b
    return F.normalize(a, dim=0) if meta["normalize"] else a


@torch.no_grad()
def predict(relation, head=None, tail=None, top=10):
    """The top answers (entity name, score) to (head, relation, ?) or (?, relation, tail)."""
    r = relation_id[relation]
    if head is not None:
        q = query(entity_id[head], r)
    else:
        q = query(entity_id[tail], r + meta["num_relations"])
    scores = (F.normalize(E, dim=1) if meta["normalize"] else E) @ q
    order = torch.sort(-scores.double(), stable=True).indices[:top]
    return [(meta["entities"][i], float(scores[i])) for i in order.tolist()]
'''


def export_kg_run(run_dir: str | Path, out: str | Path) -> Path:
    """Export the link predictor of a KG run directory (its best epoch) into ``out``."""
    check_export_folder(out, "a KG run", "entity and relation tables, names, README.md")
    link = load_link_model(run_dir)
    summary_path = Path(run_dir) / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    return export_link_model(link, out, test=summary.get("test"))


def export_link_model(
    link: LinkModel, out: str | Path, *, test: dict[str, Any] | None = None
) -> Path:
    """Write ``link`` as a folder (module docstring); ``out`` must not exist or be empty.

    ``test``: the run's filtered test metrics, copied into ``link.json`` as they are.
    """
    folder = check_export_folder(out, "a KG run", "entity and relation tables, names, README.md")
    folder.mkdir(parents=True, exist_ok=True)
    model = link.model
    tables = {
        "entity": model.entity.weight.detach().float().cpu().clone(),
        "relation": model.relation.weight.detach().float().cpu().clone(),
    }
    torch.save(tables, folder / "embeddings.pt")
    meta = {
        "kind": model.kind,
        "normalize": bool(model.normalize),
        "num_entities": link.kg.num_entities,
        "num_relations": link.kg.num_relations,
        "entities": list(link.kg.entities.names),
        "relations": list(link.kg.relations.names),
        "score": "<f(h, r), g(e)>; head queries (?, r, t) as (t, r + num_relations, ?)",
        "test": test,
    }
    (folder / "link.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(_readme(link), encoding="utf-8")
    return folder


def _readme(link: LinkModel) -> str:
    cfg = link.config
    run = f"Recipe `{cfg.name}`" if cfg.get("name") else "A run"
    return (
        f"# Link predictor exported by spacl\n\n"
        f"{run} on `{link.kg.name}`: {link.kg.num_entities} "
        f"entities, {link.kg.num_relations} relations, {link.model.kind} embeddings of "
        f"dimension {link.model.dim}.  Plain torch, no spacl needed:\n\n"
        f"```python\n{USAGE.format(folder='.')}```\n\n"
        "Then `predict('RELATION', head='ENTITY')` ranks the tails, `predict('RELATION', "
        "tail='ENTITY')` the heads.  Scores are unfiltered (known triples are ranked too).\n"
    )
