"""Models: backbone shapes, heads, ContrastiveModel, EMA target against a loop reference."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from spacl.models import (
    MLP,
    ContrastiveModel,
    EMATarget,
    Encoded,
    ProjectionHead,
    ResNetEncoder,
    SmallCNN,
    build_backbone,
    build_model,
    cosine_momentum,
)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# ------------------------------------------------------------------------ backbones
@pytest.mark.parametrize("cifar_stem,layer1_size", [(True, 32), (False, 8)])
def test_resnet18_shapes_and_stem(cifar_stem: bool, layer1_size: int) -> None:
    net = ResNetEncoder(18, cifar_stem=cifar_stem)
    seen: dict[str, tuple[int, ...]] = {}

    def hook(module: nn.Module, inputs: object, output: torch.Tensor) -> None:
        seen["l1"] = tuple(output.shape)

    net.net.layer1.register_forward_hook(hook)
    out = net(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 512) and net.feature_dim == 512
    assert seen["l1"] == (2, 64, layer1_size, layer1_size)
    conv1 = net.net.conv1
    assert conv1.kernel_size == ((3, 3) if cifar_stem else (7, 7))
    assert conv1.stride == ((1, 1) if cifar_stem else (2, 2))
    assert isinstance(net.net.maxpool, nn.Identity) == cifar_stem
    assert isinstance(net.net.fc, nn.Identity)


def test_resnet50_and_grayscale_input() -> None:
    net = build_backbone("resnet50", cifar_stem=True)
    assert net(torch.randn(2, 3, 8, 8)).shape == (2, 2048) and net.feature_dim == 2048
    gray = ResNetEncoder(18, cifar_stem=True, in_channels=1)
    assert gray(torch.randn(2, 1, 28, 28)).shape == (2, 512)
    gray7 = ResNetEncoder(18, in_channels=1)
    assert gray7.net.conv1.in_channels == 1


@pytest.mark.parametrize("size", [8, 28])
def test_small_cnn_shapes(size: int) -> None:
    net = SmallCNN(in_channels=1, feature_dim=32)
    assert net(torch.randn(5, 1, size, size)).shape == (5, 32)
    with pytest.raises(ValueError, match=r"SmallCNN expects \[N, C, H, W\]"):
        net(torch.randn(5, size, size))


def test_mlp_shapes_and_flattening() -> None:
    net = MLP(in_dim=64, hidden_dims=(16,), out_dim=8)
    assert net(torch.randn(4, 64)).shape == (4, 8)
    assert net(torch.randn(4, 1, 8, 8)).shape == (4, 8)  # images flatten
    assert MLP(3, (), 2, batchnorm=False)(torch.randn(2, 3)).shape == (2, 2)
    with pytest.raises(ValueError, match="MLP expects inputs with 64 values each"):
        net(torch.randn(4, 63))


def test_backbone_errors() -> None:
    with pytest.raises(ValueError, match="depth must be 18 or 50, got 34"):
        ResNetEncoder(34)
    with pytest.raises(ValueError, match=r"name must be one of .*got 'vit'"):
        build_backbone("vit")
    with pytest.raises(ValueError, match="feature_dim must be an int >= 1, got 0"):
        SmallCNN(feature_dim=0)


# --------------------------------------------------------------------------- heads
@pytest.mark.parametrize(
    "kind,bn", [("identity", False), ("linear", False), ("mlp", False), ("mlp", True)]
)
def test_projection_heads(kind: str, bn: bool) -> None:
    head = ProjectionHead(32, 16, kind=kind, hidden_dim=24, batchnorm=bn)
    out = head(torch.randn(6, 32))
    assert out.shape == (6, 32 if kind == "identity" else 16) and head.out_dim == out.shape[1]
    has_bn = any(isinstance(m, nn.BatchNorm1d) for m in head.modules())
    assert has_bn == bn
    with pytest.raises(ValueError, match=r"ProjectionHead expects \[N, 32\]"):
        head(torch.randn(6, 31))
    with pytest.raises(ValueError, match="kind must be one of"):
        ProjectionHead(32, kind="deep")


def test_mlp_head_matches_manual_formula() -> None:
    head = ProjectionHead(5, 3, kind="mlp", hidden_dim=4).double()
    x = torch.randn(7, 5, dtype=torch.float64)
    lin1, lin2 = head.net[0], head.net[2]
    ref = torch.relu(x @ lin1.weight.T + lin1.bias) @ lin2.weight.T + lin2.bias
    torch.testing.assert_close(head(x), ref)


# ------------------------------------------------------------------ ContrastiveModel
def test_contrastive_model_outputs_and_view_layout() -> None:
    model = build_model("small_cnn", head="mlp", proj_dim=8, in_channels=1, feature_dim=16)
    views = torch.randn(4, 3, 1, 8, 8)
    out = model.encode_views(views)
    assert isinstance(out, Encoded)
    assert out.features.shape == (4, 3, 16) and out.projections.shape == (4, 3, 8)
    model.eval()  # BatchNorm with running stats: per-view forward must match
    out = model.encode_views(views)
    for v in range(3):
        single = model(views[:, v])
        torch.testing.assert_close(out.features[:, v], single.features)
        torch.testing.assert_close(out.projections[:, v], single.projections)
    assert model.feature_dim == 16
    model.train()
    loss = model(views[:, 0]).projections.sum()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    with pytest.raises(ValueError, match=r"views must be \[B, V, ...\]"):
        model.encode_views(torch.randn(4, 8))


def test_contrastive_model_without_head_returns_features_twice() -> None:
    model = ContrastiveModel(MLP(6, (8,), 4))
    out = model(torch.randn(3, 6))
    assert torch.equal(out.features, out.projections)


# ------------------------------------------------------------------------------ EMA
def _online() -> nn.Module:
    return build_model(
        "mlp", head="mlp", proj_dim=3, in_dim=5, hidden_dims=(7,), out_dim=4, head_batchnorm=True
    ).double()


def _perturb(model: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype))
    model.train()
    model(torch.randn(9, 5, dtype=torch.float64, generator=gen))  # moves BN running stats


@pytest.mark.parametrize("momentum", [0.5, 0.9, 0.996])
def test_ema_update_matches_loop_reference(momentum: float) -> None:
    online = _online()
    target = EMATarget(online, momentum)
    ref = copy.deepcopy(online)  # loop reference state
    for step in range(3):
        _perturb(online, step)
        target.update()
        with torch.no_grad():
            for t, o in zip(ref.parameters(), online.parameters(), strict=True):
                t.copy_(momentum * t + (1 - momentum) * o)
            for t, o in zip(ref.buffers(), online.buffers(), strict=True):
                t.copy_(o)
        for (name, t), r in zip(target.ema.named_parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(t, r, atol=1e-12, rtol=1e-12, msg=name)
        for t, o in zip(target.ema.buffers(), online.buffers(), strict=True):
            assert torch.equal(t, o)
    # The target is a real average, not a copy of the online model.
    diff = [
        float((t - o.detach()).abs().max())
        for t, o in zip(target.ema.parameters(), online.parameters(), strict=True)
    ]
    assert max(diff) > 1e-3


def test_ema_momentum_override_and_float32() -> None:
    online = _online().float()
    target = EMATarget(online, 0.9)
    before = [p.clone() for p in target.ema.parameters()]
    _perturb(online.double(), 1)
    online.float()
    target.update(momentum=1.0)  # leaves parameters unchanged
    for p, b in zip(target.ema.parameters(), before, strict=True):
        assert torch.equal(p, b)
    target.update(momentum=0.0)  # copies the online parameters
    for p, o in zip(target.ema.parameters(), online.parameters(), strict=True):
        assert torch.equal(p, o)


def test_ema_target_has_no_gradient() -> None:
    online = _online()
    target = EMATarget(online, 0.99)
    assert all(not p.requires_grad for p in target.ema.parameters())
    assert all(p.requires_grad for p in online.parameters())
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    out = target(x)
    assert isinstance(out, Encoded)
    assert not out.features.requires_grad and not out.projections.requires_grad
    views = target.encode_views(torch.randn(2, 3, 5, dtype=torch.float64))
    assert views.projections.shape == (2, 3, 3) and not views.projections.requires_grad
    # state_dict holds only the EMA copy, not the online model.
    keys = list(target.state_dict())
    assert keys and all(k.startswith("ema.") for k in keys)
    assert len(keys) == len(online.state_dict())


def test_momentum_zero_shares_the_encoder() -> None:
    online = _online()
    target = EMATarget(online, 0.0)
    assert target.shared and target.module is online
    assert len(list(target.parameters())) == 0 and len(target.state_dict()) == 0
    online.eval()
    x = torch.randn(4, 5, dtype=torch.float64)
    out = target(x)
    torch.testing.assert_close(out.projections, online(x).projections)
    assert not out.projections.requires_grad
    _perturb(online, 3)  # the target follows immediately, update() is a no-op
    target.update()
    online.eval()
    torch.testing.assert_close(target(x).projections, online(x).projections)


@pytest.mark.parametrize("bad", [1.0, -0.1, 1.5, float("nan")])
def test_momentum_outside_range_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="momentum must be in"):
        EMATarget(_online(), bad)


def test_cosine_momentum_schedule() -> None:
    assert cosine_momentum(0.99, 0, 100) == pytest.approx(0.99)
    assert cosine_momentum(0.99, 100, 100) == pytest.approx(1.0)
    assert cosine_momentum(0.99, 50, 100) == pytest.approx(
        1 - 0.01 * (math.cos(math.pi / 2) + 1) / 2
    )
    with pytest.raises(ValueError, match="step must be"):
        cosine_momentum(0.99, 101, 100)
