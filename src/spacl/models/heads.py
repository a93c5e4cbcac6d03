"""Projection heads ``h``: identity, linear, or the 2-layer MLP of SimCLR / SupCon.

``mlp``: ``Linear(in, hidden) [-> BatchNorm1d] -> ReLU -> Linear(hidden, out)``
(Chen et al. 2020, SimCLR; with ``batchnorm=True`` the SimCLR-v2 / MoCo-v3 variant).
Contrastive losses apply their own normalisation (``sphere | ball | none``), so the
head does not normalise.
"""

from __future__ import annotations

from torch import Tensor, nn

from spacl._validation import check_choice

__all__ = ["HEAD_KINDS", "ProjectionHead"]

HEAD_KINDS = ("identity", "linear", "mlp")


class ProjectionHead(nn.Module):
    """Projection ``z = h(features)``.

    Args:
        in_dim: feature width.
        out_dim: projection width (ignored for ``identity``, which keeps ``in_dim``).
        kind: ``"identity"``, ``"linear"`` or ``"mlp"``.
        hidden_dim: hidden width of the MLP (default ``in_dim``).
        batchnorm: BatchNorm1d after the hidden layer of the MLP.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int = 128,
        kind: str = "mlp",
        hidden_dim: int | None = None,
        batchnorm: bool = False,
    ) -> None:
        super().__init__()
        check_choice(kind, "kind", list(HEAD_KINDS))
        for name, value in (("in_dim", in_dim), ("out_dim", out_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        hidden = in_dim if hidden_dim is None else hidden_dim
        if not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"hidden_dim must be an int >= 1, got {hidden_dim!r}")
        self.kind = kind
        self.in_dim = in_dim
        self.out_dim = in_dim if kind == "identity" else out_dim
        self.net: nn.Module
        if kind == "identity":
            self.net = nn.Identity()
        elif kind == "linear":
            self.net = nn.Linear(in_dim, out_dim)
        else:
            layers: list[nn.Module] = [nn.Linear(in_dim, hidden, bias=not batchnorm)]
            if batchnorm:
                layers.append(nn.BatchNorm1d(hidden))
            layers += [nn.ReLU(inplace=True), nn.Linear(hidden, out_dim)]
            self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != self.in_dim:
            raise ValueError(
                f"ProjectionHead expects [N, {self.in_dim}] features, got shape {tuple(x.shape)}"
            )
        return self.net(x)
