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

from spacl._validation import check_labels, check_tensor
from spacl.evaluate._inputs import check_chunk_size, check_pair, check_queries, check_split

__all__ = ["class_centres", "nearest_centre_accuracy", "nearest_centre_predict"]


def class_centres(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """``(classes[C'], centres[C', d])``: float64 means of the classes present in ``labels``.

    ``mu_c = 1/n_c sum_{i : y_i = c} f_i`` for each label value ``c`` present (sorted), the
    class means of neural collapse (Papyan, Han & Donoho 2020) and of the nearest-class-
    centre classifier.  ``features`` is a finite float ``[N, d]`` tensor and ``labels``
    integers ``>= 0`` of length ``N``.

    Example:
        >>> import torch
        >>> from spacl.evaluate import class_centres
        >>> features = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
        >>> classes, centres = class_centres(features, torch.tensor([0, 0, 3]))
        >>> classes
        tensor([0, 3])
        >>> centres
        tensor([[1., 0.],
                [0., 4.]], dtype=torch.float64)
    """
    features, labels = _check_labelled(features, labels)
    return _class_centres(features, labels)


def _check_labelled(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`check_split` whose errors name ``features`` and ``labels`` (the arguments)."""
    check_tensor(features, "features", ndim=2)
    if features.shape[0] < 1:
        raise ValueError(f"features needs at least one row, got shape {tuple(features.shape)}")
    labels = check_labels(labels, int(features.shape[0]), "labels")
    if int(labels.min()) < 0:
        raise ValueError(f"labels must be >= 0, got minimum {int(labels.min())}")
    return features, labels.to(features.device)


def _class_centres(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
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
    """Predicted labels ``LongTensor[M]``: the class of the nearest training centre.

    ``y_hat(x) = argmin_c ||x - mu_c||_2`` over the training class means ``mu_c``
    (:func:`class_centres`; the NC4 classifier of Papyan, Han & Donoho 2020).
    ``test_features [M, d]`` must have the training width ``d``; distances are float64,
    so float32 and float64 features may be mixed.

    Example:
        >>> import torch
        >>> from spacl.evaluate import nearest_centre_predict
        >>> train = torch.tensor([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
        >>> nearest_centre_predict(train, torch.tensor([0, 0, 1, 1]), torch.tensor([[3.0, 5.0]]))
        tensor([1])
    """
    chunk_size = check_chunk_size(chunk_size)
    train_features, train_labels = check_split(train_features, train_labels, "train")
    train_features, test_features = check_queries(train_features, test_features)
    if normalize:
        train_features = F.normalize(train_features, dim=1)
        test_features = F.normalize(test_features, dim=1)
    classes, centres = _class_centres(train_features, train_labels)
    centre_sq = (centres * centres).sum(1)
    preds = []
    for start in range(0, int(test_features.shape[0]), chunk_size):
        x = test_features[start : start + chunk_size].to(torch.float64)
        # ||x - mu||^2 = ||x||^2 - 2 <x, mu> + ||mu||^2; ||x||^2 does not change the argmin
        dist = centre_sq.unsqueeze(0) - 2.0 * (x @ centres.T)
        preds.append(classes[dist.argmin(dim=1)])
    if not preds:
        return torch.zeros(0, dtype=classes.dtype, device=classes.device)
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
    """Top-1 accuracy in ``[0, 1]`` of the nearest-class-centre classifier.

    ``mean_i [argmin_c ||x_i - mu_c||_2 = y_i]`` over the test rows, ``mu_c`` the training
    class means (Papyan, Han & Donoho 2020's NC4 classifier; :func:`nearest_centre_predict`).
    Mixed float32/float64 train and test features are promoted to the wider dtype.

    Example:
        >>> import torch
        >>> from spacl.evaluate import nearest_centre_accuracy
        >>> train = torch.tensor([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> test = torch.tensor([[1.0, 1.0], [3.0, 1.0], [2.5, 0.0]])
        >>> nearest_centre_accuracy(train, labels, test, torch.tensor([0, 1, 0]))
        0.6666666666666666
    """
    tr_f, tr_y, te_f, te_y = check_pair(train_features, train_labels, test_features, test_labels)
    pred = nearest_centre_predict(tr_f, tr_y, te_f, normalize=normalize, chunk_size=chunk_size)
    return float((pred == te_y).double().mean())
