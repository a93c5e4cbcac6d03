"""The claims table of the hard-negatives study: claim, quoted number with source, rule.

Sources: the paper's own statements are quoted from the notes in ``shared/seeds``
(Jiang et al., "Experimental results", real datasets and synthetic data: statements
without tables); the CIFAR-100 accuracies are the authors' notebook as quoted by SPEC
§2, labelled "authors' code".  Every verdict comes from a rule of
:mod:`spacl.studies.verdicts`, evaluated by
:func:`~spacl.studies.claim_table.evaluate_claims`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spacl.studies.claim_table import ClaimSpec, refuted_earlier
from spacl.studies.hard_negatives.config import PAPER_NCC_CIFAR100, HardNegativesConfig
from spacl.studies.stats import fmt
from spacl.studies.study import values as v
from spacl.studies.verdicts import Verdict, at_most, best_of, combine, compare, not_run, trend

__all__ = ["claims"]

PAPER_RESULTS = "paper, experimental results (statement, no table)"
NOTEBOOK = "CIFAR-100 NCC %: " + ", ".join(f"β={b:g}: {a}" for b, a in PAPER_NCC_CIFAR100.items())


def _nc_better(m: Mapping[str, Any], part: str, hi: str, lo: str) -> Verdict:
    """``hi`` is closer to neural collapse than ``lo``: lower ETF deviation and CDNV."""
    a, b = m[part][hi], m[part][lo]
    return combine(
        {
            "ETF deviation": compare(
                v(b, "etf_deviation"), v(a, "etf_deviation"), min_gap=0.01, names=(lo, hi)
            ),
            "CDNV": compare(v(b, "cdnv"), v(a, "cdnv"), min_gap=0.002, names=(lo, hi)),
        },
        every=True,  # "ETF deviation and CDNV": a conjunction holds in every part
    )


def _accuracy_claims(cfg: HardNegativesConfig, where: str) -> list[ClaimSpec]:
    hard = [b for b in cfg.betas if b > 0]

    def ncc(m: Mapping[str, Any], b: float) -> list[float]:
        return v(m["supervised"][f"beta={b:g}"], "ncc", 100)

    return [
        ClaimSpec(
            "hscl_beats_scl",
            "§2 SCL vs HSCL",
            "With labels, hard negatives (HSCL, beta=5) beat SCL in nearest-class-mean accuracy",
            f"{PAPER_RESULTS}: moderate hardness (β=5, 10) beats SCL by more than 40 points; "
            "authors' notebook (SPEC §2): CIFAR-100 SCL 10.38 vs HSCL 58.39",
            "paper",
            lambda m: f"{where} NCC %: SCL {fmt(ncc(m, 0.0))} vs HSCL {fmt(ncc(m, 5.0))}",
            lambda m: compare(ncc(m, 5.0), ncc(m, 0.0), min_gap=0.5, names=("HSCL", "SCL")),
        ),
        ClaimSpec(
            "every_beta_beats_scl",
            "§2 accuracy vs beta",
            "Every hardness beta > 0 beats SCL (beta = 0) in NCC accuracy",
            NOTEBOOK,
            "authors' code",
            lambda m: ", ".join(f"β={b:g}: {fmt(ncc(m, b), digits=1)}" for b in cfg.betas),
            lambda m: combine(
                {
                    f"beta={b:g}": compare(
                        ncc(m, b), ncc(m, 0.0), min_gap=0.5, names=(f"beta={b:g}", "beta=0")
                    )
                    for b in hard
                },
                every=True,
            ),
        ),
        ClaimSpec(
            "beta5_best_accuracy",
            "§2 accuracy vs beta",
            "Among beta in {2, 5, 10, 30}, beta = 5 gives the best NCC accuracy (the "
            "notebook's numbers; the paper states no best beta for supervised accuracy)",
            "CIFAR-100: 31.86 / 58.39 / 57.07 / 54.57",
            "authors' code",
            lambda m: " / ".join(fmt(ncc(m, b), digits=1) for b in hard),
            lambda m: best_of({b: ncc(m, b) for b in hard}, 5.0, min_gap=0.5),
            earlier=refuted_earlier(),
        ),
    ]


def _geometry_claims(cfg: HardNegativesConfig, c1: int) -> list[ClaimSpec]:
    def etf(m: Mapping[str, Any], part: str, key: str) -> list[float]:
        return v(m[part][key], "etf_deviation")

    return [
        ClaimSpec(
            "hscl_avoids_dc",
            "§2 NC vs DC",
            "HSCL moves toward neural collapse while SCL suffers dimensional collapse "
            "(class-mean effective rank higher, ETF deviation lower)",
            f"{PAPER_RESULTS}: without hard negatives or normalisation Adam suffers DC",
            "paper",
            lambda m: (
                f"class-mean eff. rank of {c1}: SCL "
                f"{fmt(v(m['supervised']['beta=0'], 'class_mean_rank'), digits=1)} vs HSCL "
                f"{fmt(v(m['supervised']['beta=5'], 'class_mean_rank'), digits=1)}; ETF dev. "
                f"{fmt(etf(m, 'supervised', 'beta=0'), digits=3)} vs "
                f"{fmt(etf(m, 'supervised', 'beta=5'), digits=3)}"
            ),
            lambda m: combine(
                {
                    "rank": compare(
                        v(m["supervised"]["beta=5"], "class_mean_rank"),
                        v(m["supervised"]["beta=0"], "class_mean_rank"),
                        min_gap=1.0,
                        names=("HSCL", "SCL"),
                    ),
                    "ETF deviation": compare(
                        etf(m, "supervised", "beta=0"),
                        etf(m, "supervised", "beta=5"),
                        min_gap=0.01,
                        names=("SCL", "HSCL"),
                    ),
                },
                every=True,  # "A while B": a conjunction holds in every part
            ),
        ),
    ]


def _nc_claims(cfg: HardNegativesConfig) -> list[ClaimSpec]:
    sup = [f"beta={b:g}" for b in cfg.betas]

    def etf(m: Mapping[str, Any], part: str, key: str) -> list[float]:
        return v(m[part][key], "etf_deviation")

    return [
        ClaimSpec(
            "supervised_nc_improves_with_beta",
            "§2 NC metrics vs beta",
            "With labels, more hardness brings the model closer to neural collapse: the ETF "
            "deviation falls at every step of the beta sweep",
            f'{PAPER_RESULTS}: "increasing hardness moves closer to NC" (supervised)',
            "paper",
            lambda m: (
                "ETF dev.: "
                + ", ".join(f"β={k[5:]}: {fmt(etf(m, 'supervised', k), digits=3)}" for k in sup)
            ),
            lambda m: trend(
                [etf(m, "supervised", k) for k in sup], increasing=False, min_gap=0.01, labels=sup
            ),
        ),
        ClaimSpec(
            "dc_without_normalisation",
            "§2 normalisation",
            "Without feature normalisation the Adam-trained encoder suffers dimensional "
            f"collapse (class-mean rank lower than in the unit ball; beta={cfg.norm_beta:g})",
            f"{PAPER_RESULTS}: normalisation is essential against DC",
            "paper",
            lambda m: (
                "class-mean rank: "
                + ", ".join(
                    f"{mode} {fmt(v(m['normalization'][mode], 'class_mean_rank'), digits=1)}"
                    for mode in ("ball", "sphere", "none")
                )
            ),
            lambda m: compare(
                v(m["normalization"]["ball"], "class_mean_rank"),
                v(m["normalization"]["none"], "class_mean_rank"),
                min_gap=1.0,
                names=("ball", "none"),
            ),
        ),
    ]


def _unsupervised_claims(cfg: HardNegativesConfig) -> list[ClaimSpec]:
    keys = [f"beta={b:g}" for b in cfg.betas]
    return [
        ClaimSpec(
            "hucl_beta5_best_nc",
            "§2 UCL vs HUCL",
            "Unsupervised, there is an optimal hardness, beta = 5, on the NC metrics: its "
            "ETF deviation is the lowest of the sweep",
            f'{PAPER_RESULTS}: "in the unsupervised setting an optimal hardness (β=5)"',
            "paper",
            lambda m: (
                "ETF dev.: "
                + ", ".join(
                    f"β={k[5:]}: {fmt(v(m['unsupervised'][k], 'etf_deviation'), digits=3)}"
                    for k in keys
                )
            ),
            lambda m: best_of(
                {k: v(m["unsupervised"][k], "etf_deviation") for k in keys},
                "beta=5",
                min_gap=0.01,
                lowest=True,
            ),
            earlier=refuted_earlier(),
        ),
        ClaimSpec(
            "hucl_large_beta_drifts",
            "§2 UCL vs HUCL",
            "Unsupervised, large beta (30) drifts away from neural collapse: ETF deviation "
            "and within-class variability (CDNV) grow from beta = 5 to beta = 30",
            f"{PAPER_RESULTS}: too much hardness gives worse NC metrics and more DC",
            "paper",
            lambda m: (
                f"CDNV: β=5 {fmt(v(m['unsupervised']['beta=5'], 'cdnv'), digits=3)}, "
                f"β=30 {fmt(v(m['unsupervised']['beta=30'], 'cdnv'), digits=3)}; ETF dev. "
                f"{fmt(v(m['unsupervised']['beta=5'], 'etf_deviation'), digits=3)} vs "
                f"{fmt(v(m['unsupervised']['beta=30'], 'etf_deviation'), digits=3)}"
            ),
            lambda m: _nc_better(m, "unsupervised", "beta=5", "beta=30"),
            earlier=refuted_earlier(
                "mixed (at ef2c178, its parts not yet read as a conjunction; not "
                "reproduced at this scale before the mixed rule of 7a71355)"
            ),
        ),
    ]


def _batch_claim(cfg: HardNegativesConfig) -> ClaimSpec:
    small, large = str(min(cfg.batch_sizes)), str(max(cfg.batch_sizes))

    def etf(m: Mapping[str, Any], part: str, b: str) -> list[float]:
        return v(m[part][b], "etf_deviation")

    def text(m: Mapping[str, Any], part: str) -> str:
        return ", ".join(
            f"B={b}: {fmt(etf(m, part, b), digits=3)}" for b in map(str, cfg.batch_sizes)
        )

    return ClaimSpec(
        "small_batch_hurts_nc",
        "§2 batch size",
        f"A small batch ({small}) hurts neural collapse on many-class data (ETF deviation "
        f"larger than with batch {large}; HSCL beta={cfg.batch_beta:g}), both at equal epochs "
        "and at equal optimiser steps",
        f"{PAPER_RESULTS}: NC holds for batch 64-512, batch 32 hinders it on many classes",
        "paper",
        lambda m: (
            f"ETF dev., equal epochs ({cfg.epochs}): {text(m, 'batch_size')}; equal steps "
            f"({m['batch_size_steps']['steps']}): {text(m, 'batch_size_steps')}"
        ),
        lambda m: combine(
            {
                when: compare(
                    etf(m, part, small),
                    etf(m, part, large),
                    min_gap=0.01,
                    names=(f"B={small}", f"B={large}"),
                )
                for part, when in (
                    ("batch_size", "equal epochs"),
                    ("batch_size_steps", "equal steps"),
                )
            },
            what="regimes",
            every=True,  # "both at equal epochs and at equal optimiser steps"
        ),
        earlier=refuted_earlier("mixed (at 18aadd9, before the every-regime rule)"),
    )


def _synthetic_and_init_claims(cfg: HardNegativesConfig) -> list[ClaimSpec]:
    def cdnv(m: Mapping[str, Any], key: str) -> list[float]:
        return v(m["synthetic"][key], "cdnv")

    def drift(m: Mapping[str, Any]) -> list[float]:
        near = m["near_nc"]
        start, end = v(near["init"], "etf_deviation"), v(near["final"], "etf_deviation")
        rand = v(near["random_init_final"], "etf_deviation")
        return [(e - s) / max(r - s, 1e-12) for s, e, r in zip(start, end, rand, strict=True)]

    return [
        ClaimSpec(
            "noise_positives_no_nc",
            "§2 synthetic data",
            "Gaussian-noise positives break conditional independence: no neural collapse for "
            "(H)UCL, unlike label-based positives (CDNV larger with noise positives)",
            "paper, synthetic data: UCL reaches NC only with label-based positives",
            "paper",
            lambda m: "; ".join(
                f"β={b:g}: CDNV label {fmt(cdnv(m, f'label/beta={b:g}'), digits=3)} vs noise "
                f"{fmt(cdnv(m, f'noise/beta={b:g}'), digits=3)}"
                for b in cfg.synthetic_betas
            ),
            lambda m: combine(
                {
                    f"beta={b:g}": compare(
                        cdnv(m, f"noise/beta={b:g}"),
                        cdnv(m, f"label/beta={b:g}"),
                        min_gap=0.002,
                        names=("noise", "label"),
                    )
                    for b in cfg.synthetic_betas
                },
                every=True,  # for (H)UCL: every beta
            ),
        ),
        ClaimSpec(
            "near_nc_init_kept",
            "§2 near-NC initialisation",
            "Started at (near) a simplex ETF, SCL training keeps neural collapse: the ETF "
            "deviation stays closer to its start than to where SCL from a random start ends "
            "(drift ratio (end - start) / (random end - start) <= 0.5)",
            f"{PAPER_RESULTS}: from a near-NC start SCL/HSCL keep NC",
            "paper",
            lambda m: (
                f"ETF dev.: near-NC start {fmt(v(m['near_nc']['init'], 'etf_deviation'), digits=3)}"
                f" -> {fmt(v(m['near_nc']['final'], 'etf_deviation'), digits=3)}; random init -> "
                f"{fmt(v(m['near_nc']['random_init_final'], 'etf_deviation'), digits=3)}; drift "
                f"ratio {fmt(drift(m), digits=2)}"
            ),
            lambda m: at_most(drift(m), 0.5),
        ),
    ]


def _in_batch_claim(cfg: HardNegativesConfig, where: str) -> ClaimSpec:
    """HSCL vs SCL with the in-batch reweighting estimator (the sampling arm's recipe)."""
    beta = max(cfg.in_batch_betas)
    hard = f"beta={beta:g}"

    def ncc(m: Mapping[str, Any], key: str) -> list[float]:
        return v(m["in_batch"][key], "ncc", 100)

    def text(m: Mapping[str, Any]) -> str:
        if "in_batch" not in m:
            return "not trained"
        return (
            f"{where} NCC %, in-batch estimator: SCL {fmt(ncc(m, 'beta=0'))} vs HSCL "
            f"(β={beta:g}) {fmt(ncc(m, hard))}"
        )

    def rule(m: Mapping[str, Any]) -> Verdict:
        if "in_batch" not in m:
            return not_run(
                "HSCL trained with the in-batch reweighting estimator: these stored results "
                "hold the sampling estimator only (K = 1; a rerun of the study trains it)"
            )
        return compare(ncc(m, hard), ncc(m, "beta=0"), min_gap=0.5, names=("HSCL", "SCL"))

    return ClaimSpec(
        "in_batch_estimator_beats_scl",
        "§2 estimators",
        "With the in-batch reweighting estimator (HCL-style, HardNegativeLoss) too, HSCL "
        f"(beta={beta:g}) beats SCL (beta = 0) in NCC accuracy on many-class data "
        "(the sampling arm's batches, steps, seeds and beta; temperature 1, no tuning in "
        "either arm)",
        "SPEC §2: both estimators required",
        "SPEC",
        text,
        rule,
    )


def claims(cfg: HardNegativesConfig, num_classes: int, source: str) -> list[ClaimSpec]:
    """The study's claims table, in report order."""
    where = "CLINC150" if source == "clinc150" else "synthetic fallback"
    return [
        *_accuracy_claims(cfg, where),
        *_geometry_claims(cfg, num_classes - 1),
        *_nc_claims(cfg),
        *_unsupervised_claims(cfg),
        _batch_claim(cfg),
        *_synthetic_and_init_claims(cfg),
        _in_batch_claim(cfg, where),
    ]
