"""spacl: contrastive learning with hard samples, and the geometry of what it learns.

Subpackages
-----------
``spacl.losses``     every objective on one masked-logsumexp kernel
``spacl.mining``     SPACL's miners (dynamic anchor, farthest point, relative threshold,
                     adversarial negatives)
``spacl.geometry``   neural / dimensional collapse, uniformity, SPACL optimality checks
``spacl.alignment``  CKA, RSA and the CL-vs-NSCL bound
``spacl.data``, ``spacl.models``, ``spacl.engine``, ``spacl.evaluate``  training system

``spacl.load(run_dir)`` returns a trained run's encoder (:mod:`spacl.trained`).
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__", "load"]

if TYPE_CHECKING:
    from spacl.trained import load


def __getattr__(name: str) -> Any:
    """``spacl.load`` without importing torch at ``import spacl`` (``spacl --version``)."""
    if name == "load":
        from spacl.trained import load

        return load
    raise AttributeError(f"module 'spacl' has no attribute {name!r}")
