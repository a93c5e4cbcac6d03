"""Weighted k-nearest-neighbour classification on frozen features (Wu et al. 2018, InstDisc).

For a test feature ``x`` and the training bank ``{(f_j, y_j)}``, all L2-normalised,
with ``s_j = <x, f_j>`` (cosine similarity) and ``N_k(x)`` the ``k`` most similar bank
entries::

    score_c(x) = sum_{j in N_k(x)} exp(s_j / t) * [y_j = c],      y_hat(x) = argmax_c score_c(x)

This is the protocol of InstDisc, MoCo and lightly's ``knn_predict`` (defaults
``k = 200``, ``t = 0.1``).  It is vectorised over chunks of test rows, so memory is
``O(chunk_size * N_train)``.  Ties in ``score`` go to the smallest class index.  The
weights are computed as ``exp((s_j - max_i s_i) / t)`` (the same ratios, so the same
prediction) in at least float32, so no weight overflows at a small ``t`` or in float16.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from spacl._validation import check_positive
from spacl.evaluate._inputs import (
    check_chunk_size,
    check_pair,
    check_queries,
    check_split,
    num_classes_of,
)

__all__ = ["knn_accuracy", "knn_predict"]


@torch.no_grad()
def knn_predict(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    *,
    num_classes: int,
    k: int = 200,
    t: float = 0.1,
    chunk_size: int = 1024,
) -> Tensor:
    """Predicted labels ``LongTensor[M]`` of ``test_features[M, d]`` (see module docstring).

    ``y_hat(x) = argmax_c sum_{j in N_k(x)} exp(s_j / t) [y_j = c]`` with ``s_j`` the cosine
    similarity (Wu et al. 2018).  ``k`` is clipped to the size of the bank; the two feature
    sets are brought to the wider of their dtypes.

    Example:
        >>> import torch
        >>> from spacl.evaluate import knn_predict
        >>> bank = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
        >>> query = torch.tensor([[0.1, 1.0]])
        >>> knn_predict(bank, torch.tensor([0, 0, 1]), query, num_classes=2, k=1)
        tensor([1])
    """
    train_features, train_labels = check_split(train_features, train_labels, "train")
    train_features, test_features = check_queries(train_features, test_features)
    if int(train_labels.max()) >= num_classes:
        raise ValueError(
            f"num_classes must exceed every train label, got {num_classes} for labels up to "
            f"{int(train_labels.max())}"
        )
    return _weighted_vote(
        train_features, train_labels, test_features, num_classes, k, t, chunk_size
    )


@torch.no_grad()
def _weighted_vote(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    num_classes: int,
    k: int,
    t: float,
    chunk_size: int,
) -> Tensor:
    """:func:`knn_predict` on validated inputs of one dtype and device."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    check_positive(t, "t")
    chunk_size = check_chunk_size(chunk_size)
    bank = F.normalize(train_features, dim=1)
    k_eff = min(k, int(bank.shape[0]))
    preds = []
    for start in range(0, int(test_features.shape[0]), chunk_size):
        query = F.normalize(test_features[start : start + chunk_size], dim=1)
        sims, idx = (query @ bank.T).topk(k_eff, dim=1)  # sorted: column 0 is the row max
        # exp((s_j - s_max) / t): the same argmax as exp(s_j / t), but no weight overflows
        # (exp(10) at t = 0.1 is inf in float16, exp(1/t) from t ~ 0.011 in float32)
        wide = torch.promote_types(sims.dtype, torch.float32)
        weights = ((sims.to(wide) - sims[:, :1].to(wide)) / t).exp()
        scores = torch.zeros(
            query.shape[0], num_classes, dtype=weights.dtype, device=weights.device
        )
        scores.scatter_add_(1, train_labels[idx], weights)
        preds.append(scores.argmax(dim=1))
    return torch.cat(preds)


def knn_accuracy(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    k: int = 200,
    t: float = 0.1,
    *,
    num_classes: int | None = None,
    chunk_size: int = 1024,
) -> float:
    """Top-1 accuracy in ``[0, 1]`` of the weighted kNN classifier of InstDisc
    (Wu et al. 2018): ``y_hat(x) = argmax_c sum_{j in N_k(x)} exp(s_j / t) [y_j = c]``,
    ``s_j`` the cosine similarity of ``x`` to bank entry ``j``.

    Example:
        >>> import torch
        >>> from spacl.evaluate import knn_accuracy
        >>> g = torch.Generator().manual_seed(0)
        >>> centres = torch.eye(3) * 4
        >>> y = torch.arange(3).repeat(20)
        >>> x = centres[y] + torch.randn(60, 3, generator=g)
        >>> knn_accuracy(x[:45], y[:45], x[45:], y[45:], k=5)
        1.0

    Args:
        train_features, train_labels: the bank ``[N, d]``, ``[N]``.
        test_features, test_labels: queries ``[M, d]``, ``[M]``.
        k: neighbours (clipped to ``N``); ``t``: temperature of the weights ``exp(s/t)``.
        num_classes: number of classes (default: largest label + 1).
        chunk_size: test rows per similarity block.
    """
    tr_f, tr_y, te_f, te_y = check_pair(train_features, train_labels, test_features, test_labels)
    c = num_classes_of(tr_y, te_y, num_classes)
    pred = _weighted_vote(tr_f, tr_y, te_f, c, k, t, chunk_size)
    return float((pred == te_y).double().mean())
