"""Representation alignment: CKA, RSA and the CL-vs-NSCL bound (SPEC §3).

Inputs are torch tensors or numpy arrays ``[N, d]`` (rows are samples, the same samples in
both representations); outputs are Python floats or dicts of floats.  Everything is
accumulated in float64, so the two representations may have different float dtypes.

* :func:`linear_cka`, :func:`debiased_cka`, :func:`minibatch_cka` - feature-space forms,
  O(N d^2) time, O(d^2) memory, float64 accumulation on centred features.
* :func:`rbf_cka` - Gaussian kernels (O(N^2 d), blocked).
* :class:`CKAAccumulator` - streaming statistics, exact merges across batches and processes.
* :func:`rsa` - Pearson / Spearman correlation of RDMs (``1 - cosine``, squared Euclidean).
* :func:`alignment_bound` - Theorem 1 and its CKA / RSA corollaries;
  :func:`surrogate_drift` / :func:`surrogate_bound_check` - the similarity-descent dynamics
  the theorem is proved for (:mod:`spacl.alignment.surrogate`).
"""

from spacl.alignment.bound import (
    alignment_bound,
    cka_lower_bound,
    kernel_drift,
    rdm_drift,
    rsa_lower_bound,
)
from spacl.alignment.cka import debiased_cka, linear_cka, minibatch_cka, rbf_cka, unbiased_hsic
from spacl.alignment.rsa import rdm, rsa
from spacl.alignment.streaming import CKAAccumulator
from spacl.alignment.surrogate import surrogate_bound_check, surrogate_drift

__all__ = [
    "CKAAccumulator",
    "alignment_bound",
    "cka_lower_bound",
    "debiased_cka",
    "kernel_drift",
    "linear_cka",
    "minibatch_cka",
    "rbf_cka",
    "rdm",
    "rdm_drift",
    "rsa",
    "rsa_lower_bound",
    "surrogate_bound_check",
    "surrogate_drift",
    "unbiased_hsic",
]
