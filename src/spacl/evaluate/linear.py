"""Linear probe: L2-regularised multinomial logistic regression on frozen features.

Objective, on standardised features ``x~ = (x - m) / s`` (train mean and standard
deviation; a constant column keeps ``s = 1``)::

    min_{W, b}  1/N sum_n CE(W x~_n + b, y_n) + (weight_decay / 2) ||W||_F^2

(the bias is not penalised).  It is solved full batch with L-BFGS (strong-Wolfe line
search) from ``W = 0, b = 0``.  **Decision** (why this and not SGD or sklearn): the
problem is strictly convex in ``W``, so the answer is unique and deterministic, there
is no learning rate or epoch count to tune, and the same code runs on the GPU for
CIFAR/ImageNet-sized feature banks.  It is the objective of scikit-learn's
``LogisticRegression(solver="lbfgs", C=1/(N * weight_decay))`` on the same standardised
features, which the tests check.  CPU runs are computed in float64 by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from spacl._validation import check_positive, check_tensor
from spacl.evaluate._inputs import check_pair, num_classes_of

__all__ = ["LinearProbeResult", "linear_probe"]


@dataclass(frozen=True)
class LinearProbeResult:
    """A fitted probe: ``logits = ((x - mean) / scale) @ weight.T + bias``.

    Returned by :func:`linear_probe` (multinomial logistic regression on standardised
    features, the linear evaluation protocol of Chen et al. 2020 / Kolesnikov et al. 2019).

    Example:
        >>> import torch
        >>> from spacl.evaluate import linear_probe
        >>> x = torch.tensor([[-2.0, 0.0], [-1.0, 0.5], [1.0, -0.5], [2.0, 0.0]])
        >>> y = torch.tensor([0, 0, 1, 1])
        >>> probe = linear_probe(x, y, x, y)
        >>> probe.predict(torch.tensor([[-3.0, 0.0], [3.0, 0.0]]))
        tensor([0, 1])
        >>> probe.logits(x).shape
        torch.Size([4, 2])
    """

    train_accuracy: float
    test_accuracy: float
    weight: Tensor  # [C, d], on standardised features
    bias: Tensor  # [C]
    mean: Tensor  # [d]
    scale: Tensor  # [d]
    loss: float  # final training objective
    iterations: int  # L-BFGS iterations used

    def logits(self, features: Tensor) -> Tensor:
        """Class scores ``[M, C]`` for raw features ``[M, d]`` (``d`` the probe's width)."""
        check_tensor(features, "features", ndim=2)
        d = int(self.weight.shape[1])
        if int(features.shape[1]) != d:
            raise ValueError(
                f"features must have the probe's width {d} (shape [M, {d}]), "
                f"got shape {tuple(features.shape)}"
            )
        x = features.to(device=self.weight.device, dtype=self.weight.dtype)
        return ((x - self.mean) / self.scale) @ self.weight.T + self.bias

    def predict(self, features: Tensor) -> Tensor:
        """Predicted labels ``LongTensor[M]``: ``argmax`` of :meth:`logits`."""
        return self.logits(features).argmax(dim=1)


def _standardizer(x: Tensor, standardize: bool) -> tuple[Tensor, Tensor]:
    """``(mean, scale)`` of the training features ``x[N, d]`` (a constant column keeps
    scale 1); the identity ``(0, 1)`` without ``standardize``."""
    if not standardize:
        return torch.zeros_like(x[0]), torch.ones_like(x[0])
    scale = x.std(0, unbiased=False)
    scale = torch.where(scale > 1e-12 * scale.max().clamp_min(1.0), scale, torch.ones_like(scale))
    return x.mean(0), scale


def linear_probe(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    num_classes: int | None = None,
    weight_decay: float = 1e-4,
    max_iter: int = 500,
    standardize: bool = True,
    tolerance: float = 1e-8,
    dtype: torch.dtype | None = None,
) -> LinearProbeResult:
    """Fit the probe on the training features and report train / test top-1 accuracy.

    ``min_{W, b} 1/N sum_n CE(W x~_n + b, y_n) + (weight_decay / 2) ||W||_F^2`` on the
    standardised features ``x~`` (module docstring), by full-batch L-BFGS: the linear
    evaluation protocol of frozen representations (Kolesnikov, Zhai & Beyer 2019; Chen et
    al. 2020).

    Args:
        train_features, train_labels: ``[N, d]``, ``[N]``.
        test_features, test_labels: ``[M, d]``, ``[M]``.
        num_classes: number of classes (default: largest label + 1).
        weight_decay: L2 strength on ``W`` (``> 0``; sklearn's ``C = 1 / (N wd)``).
        max_iter: L-BFGS iteration cap.
        standardize: standardise features with the training mean / std first.
        tolerance: gradient tolerance of L-BFGS.
        dtype: compute dtype (default float64 on the CPU, float32 elsewhere); a floating
            ``torch.dtype``.  Train and test features of different dtypes are both cast
            to it.

    Example:
        >>> import torch
        >>> from spacl.evaluate import linear_probe
        >>> _ = torch.manual_seed(0)
        >>> y = torch.arange(3).repeat(20)
        >>> x = 4.0 * torch.eye(3)[y] + torch.randn(60, 3)
        >>> probe = linear_probe(x[:45], y[:45], x[45:], y[45:])
        >>> probe.test_accuracy, probe.weight.shape
        (1.0, torch.Size([3, 3]))
    """
    tr_f, tr_y, te_f, te_y = check_pair(train_features, train_labels, test_features, test_labels)
    c = num_classes_of(tr_y, te_y, num_classes)
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype or None, got {dtype!r}")
    check_positive(weight_decay, "weight_decay")
    check_positive(tolerance, "tolerance")
    if not isinstance(max_iter, int) or isinstance(max_iter, bool) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    if dtype is None:
        dtype = torch.float64 if tr_f.device.type == "cpu" else torch.float32
    x = tr_f.detach().to(dtype)
    mean, scale = _standardizer(x, standardize)
    w, b, final, iterations = _fit_lbfgs(
        (x - mean) / scale, tr_y, c, weight_decay, max_iter, tolerance
    )
    if not (torch.isfinite(w).all() and torch.isfinite(b).all()):
        raise ValueError(
            "linear_probe diverged (non-finite weights); check the features for huge values "
            "or raise weight_decay"
        )
    result = LinearProbeResult(0.0, 0.0, w, b, mean, scale, final, iterations)
    train_acc = float((result.logits(tr_f).argmax(1) == tr_y).double().mean())
    test_acc = float((result.logits(te_f).argmax(1) == te_y).double().mean())
    return LinearProbeResult(train_acc, test_acc, w, b, mean, scale, final, iterations)


def _fit_lbfgs(
    xs: Tensor, y: Tensor, c: int, weight_decay: float, max_iter: int, tolerance: float
) -> tuple[Tensor, Tensor, float, int]:
    """Full-batch L-BFGS on the probe's objective from ``W = 0, b = 0`` (module docstring):
    ``(W [c, d], b [c], final objective, iterations)``."""
    weight = torch.zeros(c, xs.shape[1], dtype=xs.dtype, device=xs.device, requires_grad=True)
    bias = torch.zeros(c, dtype=xs.dtype, device=xs.device, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias],
        lr=1.0,
        max_iter=max_iter,
        max_eval=2 * max_iter,
        history_size=20,
        tolerance_grad=tolerance,
        tolerance_change=tolerance * 1e-4,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = (
            F.cross_entropy(xs @ weight.T + bias, y) + 0.5 * weight_decay * (weight * weight).sum()
        )
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
        final = float(closure().detach())
    state = optimizer.state[optimizer.param_groups[0]["params"][0]]
    return weight.detach(), bias.detach(), final, int(state.get("n_iter", 0))
