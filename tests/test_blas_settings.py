"""The spectrum tests under other BLAS / LAPACK code paths than this machine's default.

A result that depends on which kernel the BLAS picks (AVX-512 vs SSE, 1 vs 2 threads)
passes where it was written and fails on the next machine of the same kind (issue 17:
``effective_rank`` of a 9 x 30 matrix differed in the 8th digit between kernels).  torch
uses MKL here and numpy (the tests' references) OpenBLAS, so each setting pins both:

* ``MKL_CBWR=COMPATIBLE``: MKL's conditional-numerical-reproducibility switch, forcing
  its generic code path (it reproduced the issue's failure on this machine);
* ``MKL_ENABLE_INSTRUCTIONS=SSE4_2``: MKL limited to SSE4.2 kernels;
* ``OPENBLAS_CORETYPE``: OpenBLAS's kernel choice for numpy;
* ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` 1 vs 2: the reduction order of threaded kernels.

Each setting runs the spectrum and report test files in a fresh interpreter (the BLAS
reads these variables when it loads), about 10 s each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FILES = ["test_geometry_spectrum.py", "test_geometry_report.py"]
SETTINGS = {
    "generic-1-thread": {
        "MKL_CBWR": "COMPATIBLE",
        "OPENBLAS_CORETYPE": "Prescott",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    },
    "sse42-2-threads": {
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "OPENBLAS_CORETYPE": "Haswell",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
    },
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_spectrum_tests_pass_under_other_blas_kernels(name: str) -> None:
    env = {**os.environ, **SETTINGS[name]}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    result = subprocess.run(
        [*command, *(str(TESTS / f) for f in FILES)],
        env=env,
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{name}: {SETTINGS[name]}\n{result.stdout[-4000:]}"
