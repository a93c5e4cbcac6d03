"""spacl: contrastive learning with hard samples, and the geometry of what it learns.

Subpackages
-----------
``spacl.losses``     every objective on one masked-logsumexp kernel
``spacl.mining``     SPACL's miners (dynamic anchor, farthest point, relative threshold,
                     adversarial negatives)
``spacl.geometry``   neural / dimensional collapse, uniformity, SPACL optimality checks
``spacl.alignment``  CKA, RSA and the CL-vs-NSCL bound
``spacl.data``, ``spacl.models``, ``spacl.engine``, ``spacl.evaluate``  training system
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
