"""Behaviour unchanged by issue 40 (one engine for every task): one tiny seeded run per task
ends with the ``eval.json`` it had before the tasks moved onto the engine's loop.

The numbers below were recorded at 029ec10, after the first two issue-40 commits (the image
run's linear probe, which the Evaluator runs, and the NC3/NC4 it lets the geometry report
add, at b7221cf); the same
five runs at bbf3c33, the commit before issue 40's first change, give the same numbers:
``benchmarks/same_results_before.py`` runs them on that commit's exported tree with its
import paths and records them in ``benchmarks/results/same_results_before.json``, which
the last test here holds ``GOLDEN`` to (no training).  Tolerance: a
relative 1e-6 (float32 sums of a few hundred terms; the rankings and accuracies are counts,
equal exactly unless a score ties differently), not bitwise: a BLAS may sum in another
order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spacl.data.text import load_intent_dataset, open_intent_split
from test_kg_model import cycle_graph
from test_ood import FakeEncoder, write_topic_dataset
from test_text_finetune import tiny_backbone

pytestmark = pytest.mark.usefixtures("one_thread")

REL = 1e-6


def image_run(tmp_path: Path) -> dict[str, Any]:
    from spacl.tasks import run_recipe

    overrides = [
        "train.epochs=2",
        "train.max_steps=8",
        "train.progress=false",
        "eval.linear_probe=true",
        "eval.probe_max_iter=50",
        "eval.every_epochs=1",
        "log.tensorboard=false",
    ]
    run_recipe("digits/spacl", overrides, out=tmp_path / "image", quiet=True)
    return dict(json.loads((tmp_path / "image" / "eval.json").read_text()))


def kg_run(tmp_path: Path) -> dict[str, Any]:
    from spacl.tasks.kg import train_kg

    recipe = {
        "data": {"name": "toy", "root": str(cycle_graph(tmp_path / "toy")), "unseen": "error"},
        "model": {"dim": 16, "init_scale": 0.1, "dropout": 0.1},
        "objective": {"name": "spacl", "temperature": 0.5},
        "optim": {"name": "adagrad", "lr": 0.02, "n3": 0.001},
        "train": {"epochs": 3, "batch_size": 16, "progress": False},
        "eval": {"every_epochs": 2},
    }
    train_kg(recipe, log=None, run_dir=tmp_path / "kg")
    return dict(json.loads((tmp_path / "kg" / "eval.json").read_text()))


def _split(tmp_path: Path) -> Any:
    root = write_topic_dataset(tmp_path / "topics")
    return open_intent_split(load_intent_dataset("topics", root), 0.5, 0)


def text_head_run(tmp_path: Path) -> dict[str, Any]:
    from spacl.tasks.text import train_ood

    cfg = {
        "objective": {"name": "spacl"},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "model": {"hidden_dim": 32, "proj_dim": 16},
        "train": {"epochs": 3, "batch_size": 16, "progress": False, "seed": 1},
    }
    split, out = _split(tmp_path), tmp_path / "head"
    train_ood(cfg, encoder=FakeEncoder(dim=64), split=split, log=None, run_dir=out)
    return dict(json.loads((out / "eval.json").read_text()))


def text_finetuned_run(tmp_path: Path) -> dict[str, Any]:
    from spacl.tasks.text.config import ood_config
    from spacl.tasks.text.task import train_finetuned

    overrides = [
        "train.epochs=3",
        "finetune.max_steps=7",
        "finetune.select_epoch=dev_accuracy",
        "optim.lr=1e-3",
        "ood.min_class_count=2",
    ]
    cfg = ood_config("text/stackoverflow_finetune_spacl", overrides)
    split, out = _split(tmp_path), tmp_path / "tuned"
    train_finetuned(cfg, backbone=tiny_backbone(), split=split, log=None, run_dir=out)  # type: ignore[arg-type]
    return dict(json.loads((out / "eval.json").read_text()))


def text_detector_run(tmp_path: Path) -> dict[str, Any]:
    from spacl.tasks.text import train_ood

    cfg = {
        "detector": {"method": "da_adb", "lr": 1e-2, "max_epochs": 30, "patience": 3,
                     "batch_size": 16},
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "train": {"seed": 3},
    }  # fmt: skip
    split, out = _split(tmp_path), tmp_path / "adb"
    train_ood(cfg, encoder=FakeEncoder(dim=64), split=split, log=None, run_dir=out)
    return dict(json.loads((out / "eval.json").read_text()))


RUNS = {
    "image": image_run,
    "kg": kg_run,
    "text_head": text_head_run,
    "text_finetuned": text_finetuned_run,
    "text_detector": text_detector_run,
}

#: eval.json of every run, recorded before the change (module docstring)
GOLDEN: dict[str, dict[str, Any]] = {
    "image": {
        "main": {
            "geometry/cdnv": 0.5846268187182544,
            "geometry/class_mean_effective_rank": 8.032121265589456,
            "geometry/dim": 128.0,
            "geometry/effective_rank_eigen": 18.72186146785262,
            "geometry/effective_rank_singular": 68.18846951599762,
            "geometry/n": 359.0,
            "geometry/nc1": 0.6833745616280497,
            "geometry/nc2_equiangularity": 0.2239968009998489,
            "geometry/nc2_equinorm": 0.18537416682708466,
            "geometry/nc2_etf_deviation": 0.7035852183765978,
            "geometry/nc3": 0.9908610237253521,
            "geometry/nc4": 0.0947075208913649,
            "geometry/nc_equal_inner_product": 0.6910299965881873,
            "geometry/nc_unit_norm": 2.067976848561487,
            "geometry/nc_within_class_distance": 4.0449596352108,
            "geometry/nc_zero_sum": 2.4161169537569145,
            "geometry/num_classes": 10.0,
            "geometry/rankme": 58.77962660717568,
            "geometry/uniformity": -1.9828816905889273,
            "knn_accuracy": 0.935933147632312,
            "linear_accuracy": 0.9832869080779945,
            "linear_train_accuracy": 1.0,
            "ncc_accuracy": 0.8690807799442897,
        }
    },
    "kg": {
        "test": {
            "count": 8.0,
            "head_mrr": 0.21875,
            "hits@1": 0.125,
            "hits@10": 0.75,
            "hits@3": 0.5,
            "mr": 6.125,
            "mrr": 0.303030303030303,
            "tail_mrr": 0.387310606060606,
        },
        "valid": {
            "count": 8.0,
            "head_mrr": 0.3282828282828283,
            "hits@1": 0.375,
            "hits@10": 0.875,
            "hits@3": 0.5,
            "mr": 5.125,
            "mrr": 0.47664141414141414,
            "tail_mrr": 0.625,
        },
    },
    "text_detector": {
        "dev_accuracy": 100.0,
        "reject_all": {
            "accuracy": 50.0,
            "auroc": 50.0,
            "f1_ind": 0.0,
            "f1_ood": 66.66666666666666,
            "fpr_at_95_tpr": 100.0,
            "macro_f1": 13.333333333333334,
        },
        "test": {
            "accuracy": 60.0,
            "auroc": 55.0,
            "f1_ind": 75.1951995373048,
            "f1_ood": 36.0,
            "fpr_at_95_tpr": 67.5,
            "macro_f1": 67.35615962984383,
        },
    },
    "text_finetuned": {
        "dev_accuracy": 65.625,
        "reject_all": {
            "accuracy": 50.0,
            "auroc": 50.0,
            "f1_ind": 0.0,
            "f1_ood": 66.66666666666666,
            "fpr_at_95_tpr": 100.0,
            "macro_f1": 13.333333333333334,
        },
        "test": {
            "accuracy": 37.5,
            "auroc": 66.1875,
            "f1_ind": 48.22321682296107,
            "f1_ood": 17.02127659574468,
            "fpr_at_95_tpr": 90.0,
            "macro_f1": 41.98282877751779,
        },
    },
    "text_head": {
        "dev_accuracy": 93.75,
        "reject_all": {
            "accuracy": 50.0,
            "auroc": 50.0,
            "f1_ind": 0.0,
            "f1_ood": 66.66666666666666,
            "fpr_at_95_tpr": 100.0,
            "macro_f1": 13.333333333333334,
        },
        "test": {
            "accuracy": 67.5,
            "auroc": 87.625,
            "f1_ind": 75.84656084656083,
            "f1_ood": 54.54545454545454,
            "fpr_at_95_tpr": 35.0,
            "macro_f1": 71.58633958633959,
        },
    },
}
#: the KG run's epoch losses (summary.json ``history``), recorded with them
KG_LOSSES = [3.179318755865097, 3.166731983423233, 3.148433119058609]


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_tiny_seeded_run_ends_with_the_recorded_eval_json(tmp_path: Path, name: str) -> None:
    """Every task's tiny run, through the engine's one loop, scores what it scored before."""
    got, want = _flat(RUNS[name](tmp_path)), _flat(GOLDEN[name])
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=REL, abs=1e-12), key
    if name == "kg":
        summary = json.loads((tmp_path / "kg" / "summary.json").read_text())
        losses = [record["loss"] for record in summary["history"]]
        assert losses == pytest.approx(KG_LOSSES, rel=REL)


#: the five runs at bbf3c33, recorded by benchmarks/same_results_before.py (module docstring)
BEFORE = Path(__file__).resolve().parents[1] / "benchmarks/results/same_results_before.json"


def test_the_golden_numbers_are_those_of_the_commit_before_issue_40() -> None:
    """GOLDEN is what the runs gave before issue 40: all five runs of the bbf3c33 record
    were compared (none recorded as "not comparable") and have GOLDEN's keys and numbers,
    and the KG run its epoch losses, at REL."""
    record = json.loads(BEFORE.read_text())
    assert record["commit"].startswith("bbf3c33")
    assert sorted(record["runs"]) == sorted(GOLDEN) == sorted(RUNS)
    for name, run in record["runs"].items():
        assert isinstance(run, dict), f"the bbf3c33 record did not compare {name}: {run!r}"
        got, want = _flat(run), _flat(GOLDEN[name])
        assert sorted(got) == sorted(want), name
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=REL, abs=1e-12), (name, key)
    assert record["kg_losses"] == pytest.approx(KG_LOSSES, rel=REL)
