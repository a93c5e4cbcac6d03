"""How the engine feeds SPACL (issue 11, gradient parity): one online pass or the anchor view."""

from __future__ import annotations

import copy

import pytest
import torch

from spacl.losses import SPACLLoss
from spacl.models import build_model
from spacl.studies.common import make_arm


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("mlp", "mlp", 6, in_dim=10, hidden_dims=(16,), out_dim=8)


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("detach", [True, False])
def test_all_views_is_one_online_pass(detach: bool) -> None:
    views = torch.randn(12, 4, 10, generator=torch.Generator().manual_seed(1))
    labels = torch.arange(12) % 3
    loss = SPACLLoss(
        0.2, num_adversarial=0, positive_pool="instance_class", detach_candidates=detach
    )
    arm = make_arm("a", "spacl", copy.deepcopy(loss), _model(), lr=1e-3, use_labels=True)
    got = arm.compute_loss(views, labels)
    got.backward()
    ref_model = _model()
    z = ref_model(views.reshape(48, 10)).projections.reshape(12, 4, -1)  # one BatchNorm batch
    want = copy.deepcopy(loss)(z, z, labels)
    want.backward()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    for a, b in zip(_grads(arm.model), _grads(ref_model), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    if not detach:  # the gradient reaches the candidate views too: it differs from detached
        arm2 = make_arm(
            "b",
            "spacl",
            SPACLLoss(0.2, num_adversarial=0, positive_pool="instance_class"),
            _model(),
            lr=1e-3,
            use_labels=True,
        )
        arm2.compute_loss(views, labels).backward()
        assert any(
            not torch.allclose(a, b)
            for a, b in zip(_grads(arm.model), _grads(arm2.model), strict=True)
        )


def test_anchor_view_runs_the_online_encoder_on_the_anchor_only() -> None:
    views = torch.randn(8, 5, 10, generator=torch.Generator().manual_seed(2))
    loss = SPACLLoss(0.2, num_adversarial=0, online="anchor_view")
    arm = make_arm("a", "spacl", copy.deepcopy(loss), _model(), lr=1e-3, use_labels=False)
    got = arm.compute_loss(views, None)
    ref_model = _model()
    with torch.no_grad():
        pool = ref_model(views.reshape(40, 10)).projections.reshape(8, 5, -1)
    ref = copy.deepcopy(loss)
    a = ref.choose_anchor(pool)
    anchors = ref_model(views[torch.arange(8), a]).projections
    want = ref(anchors, pool, anchor_index=a)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_online_mode_is_validated() -> None:
    with pytest.raises(ValueError, match="online must be one of"):
        SPACLLoss(online="both")
