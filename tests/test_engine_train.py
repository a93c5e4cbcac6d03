"""End-to-end training on tiny data: every objective learns, run directories hold what is
promised, shared randomness is exact, a non-finite loss stops the run cleanly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from spacl.engine import load_checkpoint, read_metrics
from spacl.tasks.image import OBJECTIVES, NonFiniteLossError, Trainer, load_config

pytestmark = pytest.mark.usefixtures("one_thread")


TINY = [
    "data.name=synthetic",
    "data.synthetic.num_classes=4",
    "data.synthetic.dim=8",
    "data.synthetic.samples_per_class=12",
    "views.noise_sigma=0.3",
    "model.hidden_dims=[16]",
    "model.batchnorm=false",
    "model.feature_dim=8",
    "model.proj_dim=8",
    "train.batch_size=16",
    "train.epochs=2",
    "train.progress=false",
    "eval.knn_k=5",
    "log.tensorboard=false",
]


def tiny_config(*overrides: str):
    return load_config(None, [*TINY, *overrides])


def objective_overrides(name: str) -> list[str]:
    if name == "spacl":
        return [
            "objective.name=spacl",
            "views.num_views=4",
            "views.keep_original=true",
            "model.momentum=0.5",
        ]
    if name == "sampled_hard":
        return ["objective.name=sampled_hard", "objective.params.num_negatives=16"]
    return [f"objective.name={name}"]


@pytest.mark.parametrize("name", sorted(set(OBJECTIVES) - {"ntxent"}))
def test_a_few_steps_change_the_weights_and_lower_the_loss(tmp_path, name):
    cfg = tiny_config(
        *objective_overrides(name), "optim.name=adam", "optim.lr=0.01", "optim.weight_decay=0"
    )
    trainer = Trainer(cfg, tmp_path / "run", quiet=True)
    arm = trainer.arms[0]
    batch = trainer.data.stream.batch(0, 0)
    before = [p.detach().clone() for p in arm.model.parameters()]

    def loss_now() -> float:
        with torch.no_grad():
            arm.objective.eval()  # SPACL: no adversarial update, fresh generated negatives
            value = float(arm.compute_loss(batch.views, batch.labels))
            arm.objective.train()
        return value

    torch.manual_seed(0)
    first = loss_now()
    for step in range(15):
        arm.train_step(batch.views, batch.labels, step)
    torch.manual_seed(0)
    last = loss_now()
    changed = sum(
        not torch.equal(a, b) for a, b in zip(before, arm.model.parameters(), strict=True)
    )
    assert changed == len(before), f"{changed}/{len(before)} parameter tensors moved"
    assert last < first - 1e-3, f"{name}: loss {first:.4f} -> {last:.4f}"


def test_run_directory_holds_config_metrics_checkpoint_summary(tmp_path):
    cfg = tiny_config("objective.name=supcon", "train.checkpoint_every=2", "train.log_every=1")
    result = Trainer(cfg, tmp_path / "run", quiet=True).fit()
    run = tmp_path / "run"
    # 48 samples, 20% test: 40 training samples, 2 batches of 16 per epoch
    assert result.run_dir == run and result.global_step == 2 * 2
    assert {p.name for p in run.iterdir()} >= {
        "config.yaml",
        "metrics.jsonl",
        "checkpoints",
        "eval.json",
        "summary.md",
    }
    saved = load_config(run / "config.yaml")
    # the resolved config round-trips, its out_dir stored absolute (issue 38: no path
    # relative to the working directory in a run's record)
    assert saved.out_dir == str(Path(cfg.out_dir).resolve())
    saved.out_dir = cfg.out_dir
    assert saved == cfg
    records = read_metrics(run / "metrics.jsonl")
    kinds = [r["kind"] for r in records]
    assert kinds.count("train") == 4 and kinds.count("epoch") == 2 and kinds.count("eval") == 2
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4]
    assert kinds[-1] == "final"
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state["progress"]["global_step"] == 4 and state["progress"]["finished"]
    model_state = state["arms"]["main"]["model"]
    for name, value in result_model_state(cfg, run).items():
        assert torch.equal(model_state[name], value)
    metrics = json.loads((run / "eval.json").read_text())["main"]
    assert set(metrics) >= {"linear_accuracy", "knn_accuracy", "ncc_accuracy"}
    summary = (run / "summary.md").read_text()
    assert "linear probe %" in summary and f"{100 * metrics['knn_accuracy']:.2f}" in summary
    # the commands name the run as RUN, so a moved run's summary does not send one back
    assert "`spacl eval RUN`" in summary and f"written at `{Path(run).resolve()}`" in summary
    assert not list((run / "checkpoints").glob(".*tmp"))


def result_model_state(cfg, run):
    trainer = Trainer(cfg, run, read_only=True, quiet=True)
    return trainer.arms[0].model.state_dict()


def test_max_steps_stops_early_and_checkpoint_records_position(tmp_path):
    cfg = tiny_config("objective.name=simclr", "train.max_steps=3", "eval.every_epochs=0")
    result = Trainer(cfg, tmp_path / "run", quiet=True).fit()
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert result.global_step == 3
    assert state["progress"]["epoch"] == 1 and state["progress"]["step_in_epoch"] == 1
    assert not state["progress"]["finished"]
    reader = Trainer(cfg, tmp_path / "run", read_only=True, quiet=True)
    tr_f, tr_y, te_f, _ = reader.evaluator.features(reader.arms[0], bank_limit=10)
    assert tr_f.shape == (10, 8) and te_f.shape == (8, 8) and len(tr_y) == 10


def test_schedule_lr_scaling_and_ema_momentum(tmp_path):
    from spacl.models import cosine_momentum

    cfg = tiny_config(
        "objective.name=simclr",
        "optim.lr=0.1",
        "optim.lr_scaling=linear",
        "optim.reference_batch_size=8",  # batch 16: peak lr 0.2
        "optim.warmup_epochs=1",  # 2 steps per epoch
        "optim.min_lr_ratio=0.5",
        "model.momentum=0.9",
        "model.momentum_schedule=cosine",
        "eval.every_epochs=0",
    )
    trainer = Trainer(cfg, tmp_path / "run", quiet=True)
    arm = trainer.arms[0]
    lrs = [arm.lr]
    batch = trainer.data.stream.batch(0, 0)
    for step in range(4):
        arm.train_step(batch.views, batch.labels, step)
        lrs.append(arm.lr)
    # lr of steps 0..3 (and after the last): warmup 0.1, 0.2; cosine from 0.2 towards 0.1
    assert lrs == pytest.approx([0.1, 0.2, 0.2, 0.15, 0.1])
    assert [arm.momentum_at(s) for s in range(5)] == pytest.approx(
        [cosine_momentum(0.9, s, 4) for s in range(5)]
    )


class _Recorder:
    """Wraps an arm's compute_loss to fingerprint the views and labels it receives."""

    def __init__(self, arm):
        self.seen: list[str] = []
        self.inner = arm.compute_loss
        arm.compute_loss = self

    def __call__(self, views, labels, step=0):
        digest = hashlib.sha256(views.numpy().tobytes() + labels.numpy().tobytes()).hexdigest()
        self.seen.append(digest)
        return self.inner(views, labels, step)


ARMS = (
    "arms=[{name: cl, objective: {name: dcl}}, {name: nscl, objective: {name: nscl}},"
    " {name: scl, objective: {name: supcon}, optim: {lr: 0.05}},"
    " {name: ce, objective: {name: cross_entropy}}]"
)


def test_shared_randomness_same_init_same_batches_independent_arms(tmp_path):
    common = ["data.balanced=true", "eval.every_epochs=0", "eval.linear_probe=false"]
    trainer = Trainer(tiny_config(*common, ARMS), tmp_path / "multi", quiet=True)
    names = [a.name for a in trainer.arms]
    assert names == ["cl", "nscl", "scl", "ce"]
    backbones = [a.model.backbone.state_dict() for a in trainer.arms]
    for other in backbones[1:]:
        assert all(torch.equal(backbones[0][k], other[k]) for k in backbones[0])
    heads = [a.model.head.state_dict() for a in trainer.arms[:3]]
    assert all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])
    assert trainer.arms[3].model.head.out_features == 4  # CE: linear classifier, 4 classes
    assert trainer.arms[2].optimizer.param_groups[0]["lr"] == 0.05
    recorders = [_Recorder(a) for a in trainer.arms]
    trainer.fit()
    assert len(recorders[0].seen) == 4
    assert all(r.seen == recorders[0].seen for r in recorders)
    # each arm is independent of the others: training NSCL alone gives the same weights
    alone = Trainer(tiny_config(*common, "objective.name=nscl"), tmp_path / "alone", quiet=True)
    alone.fit()
    multi_nscl = trainer.arms[1].model.state_dict()
    for k, v in alone.arms[0].model.state_dict().items():
        assert torch.equal(v, multi_nscl[k]), k
    # the weights diverged between objectives
    assert not torch.equal(
        trainer.arms[0].model.backbone.net[1].weight, trainer.arms[1].model.backbone.net[1].weight
    )


@pytest.mark.parametrize("where", ["weights", "loss"])
def test_non_finite_loss_stops_with_clear_message_and_keeps_last_good_checkpoint(tmp_path, where):
    cfg = tiny_config("objective.name=simclr", "train.checkpoint_every=1", "eval.every_epochs=0")

    def corrupt(trainer, step):
        if step != 3:
            return
        if where == "weights":
            with torch.no_grad():
                trainer.arms[0].model.backbone.net[1].weight.fill_(float("nan"))
        else:
            objective = trainer.arms[0].objective
            objective.forward = lambda *a, **k: torch.tensor(float("inf"), requires_grad=True)

    trainer = Trainer(cfg, tmp_path / "run", quiet=True, callbacks=[corrupt])
    with pytest.raises(NonFiniteLossError) as info:
        trainer.fit()
    message = str(info.value)
    what = (
        "non-finite value(s) in the embeddings at step 3"
        if where == "weights"
        else "loss is inf at step 3"
    )
    assert what in message and "(step 3)" in message and "last good checkpoint" in message
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert state["progress"]["global_step"] == 3
    assert all(torch.isfinite(v).all() for v in state["arms"]["main"]["model"].values())
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert records[-1]["kind"] == "error"


def test_coarse_labels_feed_the_objective(tmp_path):
    cfg = tiny_config(
        "objective.name=cross_entropy",
        "data.label_kind=coarse",
        "data.synthetic.num_superclasses=2",
        "eval.every_epochs=0",
    )
    trainer = Trainer(cfg, tmp_path / "run", quiet=True)
    assert trainer.arms[0].model.head.out_features == 2
    batch = trainer.data.stream.batch(0, 0)
    from spacl.tasks.image.trainer import batch_labels

    coarse = trainer.cfg.data.label_kind == "coarse"
    assert torch.equal(batch_labels(batch, coarse, trainer.ctx.device), batch.coarse_labels)


def test_image_folder_path_trains_with_a_dataloader(tmp_path):
    """On-disk data (ImageNet-style folders) go through DataLoader + PlanBatchSampler."""
    from PIL import Image

    gen = torch.Generator().manual_seed(0)
    for split, per_class in (("train", 8), ("val", 3)):
        for c in range(3):
            folder = tmp_path / "folder" / split / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                pixels = (torch.rand(20, 20, 3, generator=gen) * 80 + 80 * c).to(torch.uint8)
                Image.fromarray(pixels.numpy()).save(folder / f"{i}.png")
    cfg = load_config(
        None,
        [
            "data.name=imagefolder",
            f"data.root={tmp_path / 'folder'}",
            "data.test_split=val",
            "data.image_size=16",
            "data.num_workers=0",
            "views.num_views=3",
            "views.keep_original=true",
            "model.backbone=small_cnn",
            "model.channels=[8]",
            "model.feature_dim=8",
            "model.proj_dim=8",
            "objective.name=spacl",
            "train.batch_size=8",
            "train.epochs=2",
            "train.progress=false",
            "eval.knn_k=3",
            "log.tensorboard=false",
        ],
    )
    trainer = Trainer(cfg, tmp_path / "run", quiet=True)
    assert len(trainer.data.stream) == 3  # 24 images, batch 8
    batch = next(iter(trainer.data.stream.epoch_batches(0, start=2)))
    assert batch.step == 2 and tuple(batch.views.shape) == (8, 3, 3, 16, 16)
    result = trainer.fit()
    assert result.global_step == 6
    assert 0.0 <= result.metrics["main"]["knn_accuracy"] <= 1.0
    assert result.metrics["main"]["geometry/n"] == 9  # the 9 validation images
