"""Studies: the laptop-scale checks of the papers' claims (``spacl reproduce NAME``).

==========================  ==============================================================
``verdicts``                 the verdict rules (what a claim's test says)
``claim_table``              ``ClaimSpec`` tables and their one runner (``evaluate_claims``)
``report``                   ``StudyReport``: report.md / results.json / figures
``study``                    ``StudyRun``: the scaffolding every study shares
``common``                   re-exports + study arms, seeds, threads, the same-batch loop
``hard_negatives``           SCL vs HSCL, UCL vs HUCL (``spacl reproduce hard-negatives``)
``alignment_study``          CL vs NSCL / SupCon / CE, CKA, RSA (``spacl reproduce alignment``)
``spacl_bench``              the fair SPACL study (``spacl reproduce spacl``)
==========================  ==============================================================

Studies sit on top of the tasks, the engine, the losses and the evaluation code; nothing
below imports them.  Submodules are imported on use: importing this package loads nothing.
"""
