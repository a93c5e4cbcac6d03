"""Weighted k-nearest-neighbour classification on frozen features (Wu et al. 2018, InstDisc).

For a test feature ``x`` and the training bank ``{(f_j, y_j)}``, all L2-normalised,
with ``s_j = <x, f_j>`` (cosine similarity) and ``N_k(x)`` the ``k`` most similar bank
entries::

    score_c(x) = sum_{j in N_k(x)} exp(s_j / t) * [y_j = c],      y_hat(x) = argmax_c score_c(x)

This is the protocol of InstDisc, MoCo and lightly's ``knn_predict`` (defaults
``k = 200``, ``t = 0.1``).  It is vectorised over chunks of test rows, so memory is
``O(chunk_size * N_train)``.  Ties in ``score`` go to the smallest class index.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from spacl._validation import check_positive
from spacl.evaluate._inputs import check_chunk_size, check_pair, num_classes_of

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

    ``k`` is clipped to the size of the bank. Inputs are assumed validated; use
    :func:`knn_accuracy` for the checked entry point.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    check_positive(t, "t")
    chunk_size = check_chunk_size(chunk_size)
    bank = F.normalize(train_features, dim=1)
    k_eff = min(k, int(bank.shape[0]))
    preds = []
    for start in range(0, int(test_features.shape[0]), chunk_size):
        query = F.normalize(test_features[start : start + chunk_size], dim=1)
        sims, idx = (query @ bank.T).topk(k_eff, dim=1)
        weights = (sims / t).exp()
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
    """Top-1 accuracy in ``[0, 1]`` of the weighted kNN classifier (module docstring).

    Args:
        train_features, train_labels: the bank ``[N, d]``, ``[N]``.
        test_features, test_labels: queries ``[M, d]``, ``[M]``.
        k: neighbours (clipped to ``N``); ``t``: temperature of the weights ``exp(s/t)``.
        num_classes: number of classes (default: largest label + 1).
        chunk_size: test rows per similarity block.
    """
    tr_f, tr_y, te_f, te_y = check_pair(train_features, train_labels, test_features, test_labels)
    c = num_classes_of(tr_y, te_y, num_classes)
    pred = knn_predict(tr_f, tr_y, te_f, num_classes=c, k=k, t=t, chunk_size=chunk_size)
    return float((pred == te_y).double().mean())
