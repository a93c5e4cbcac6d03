"""Nearest class centre (NCC) classification, the classifier of neural collapse's NC4.

Class centres are the training means ``mu_c = mean{f_j : y_j = c}`` of the classes
present in the training set; a test feature goes to ``argmin_c ||x - mu_c||_2``
(Papyan, Han & Donoho 2020).  **Decision**: features are used as given (Euclidean,
the NC4 classifier); ``normalize=True`` L2-normalises every feature first (a cosine
variant).  Distances are computed in float64 for a stable argmin, vectorised in
chunks; ties go to the smallest class index.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from spacl.evaluate._inputs import check_chunk_size, check_pair, check_split

__all__ = ["class_centres", "nearest_centre_accuracy", "nearest_centre_predict"]


def class_centres(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """``(classes[C'], centres[C', d])``: float64 means of the classes present in ``labels``."""
    features, labels = check_split(features, labels, "train")
    classes, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(classes), features.shape[1], dtype=torch.float64, device=features.device)
    sums.index_add_(0, inverse, features.to(torch.float64))
    return classes, sums / counts.unsqueeze(1).to(torch.float64)


@torch.no_grad()
def nearest_centre_predict(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    *,
    normalize: bool = False,
    chunk_size: int = 4096,
) -> Tensor:
    """Predicted labels ``LongTensor[M]``: the class of the nearest training centre."""
    chunk_size = check_chunk_size(chunk_size)
    if normalize:
        train_features = F.normalize(train_features, dim=1)
        test_features = F.normalize(test_features, dim=1)
    classes, centres = class_centres(train_features, train_labels)
    centre_sq = (centres * centres).sum(1)
    preds = []
    for start in range(0, int(test_features.shape[0]), chunk_size):
        x = test_features[start : start + chunk_size].to(torch.float64)
        # ||x - mu||^2 = ||x||^2 - 2 <x, mu> + ||mu||^2; ||x||^2 does not change the argmin
        dist = centre_sq.unsqueeze(0) - 2.0 * (x @ centres.T)
        preds.append(classes[dist.argmin(dim=1)])
    return torch.cat(preds)


def nearest_centre_accuracy(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    normalize: bool = False,
    chunk_size: int = 4096,
) -> float:
    """Top-1 accuracy in ``[0, 1]`` of the nearest-class-centre classifier (module docstring)."""
    tr_f, tr_y, te_f, te_y = check_pair(train_features, train_labels, test_features, test_labels)
    pred = nearest_centre_predict(tr_f, tr_y, te_f, normalize=normalize, chunk_size=chunk_size)
    return float((pred == te_y).double().mean())
