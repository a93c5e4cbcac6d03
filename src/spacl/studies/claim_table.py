"""Declarative claim tables of ``spacl reproduce`` (re-exported by :mod:`spacl.studies.verdicts`).

A study lists :class:`ClaimSpec` rows (claim, the paper's number with its source, the
measured quantity, the rule), each a function of the study's metrics, and
:func:`evaluate_claims` turns them into the report's claims.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spacl._validation import check_choice

if TYPE_CHECKING:
    from spacl.studies.verdicts import Verdict

__all__ = ["SOURCES", "ClaimSpec", "Metrics", "evaluate_claims"]

#: where a quoted number comes from (``ClaimSpec.source``)
SOURCES = ("paper", "SPEC", "authors' code", "none")

Metrics = Mapping[str, Any]


@dataclass(frozen=True)
class ClaimSpec:
    """One row of a declarative claims table.

    Args:
        key: unique identifier (``results.json["claims"][i]["key"]``).
        section: where the claim is made (``"§3 batch size"``).
        claim: the claim, in words.
        quoted: the number quoted for it (``"CKA 0.87"``, ``"figures (no table)"``).
        source: where ``quoted`` comes from: ``"paper"`` (a paper's table, named in
            ``quoted``), ``"SPEC"``, ``"authors' code"`` or ``"none"``.
        measured: ``metrics -> str``, the measured quantity.
        rule: ``metrics -> Verdict``, one of the rules of :mod:`spacl.studies.verdicts`.
    """

    key: str
    section: str
    claim: str
    quoted: str
    source: str
    measured: Callable[[Metrics], str]
    rule: Callable[[Metrics], Verdict]

    def __post_init__(self) -> None:
        check_choice(self.source, f"claim {self.key!r}: source", SOURCES)

    @property
    def paper(self) -> str:
        """The "paper's number" cell, with its source named."""
        if self.source == "none":
            return self.quoted
        return f"{self.quoted} ({self.source})" if self.source != "paper" else self.quoted


def evaluate_claims(report: Any, specs: Sequence[ClaimSpec], metrics: Metrics) -> list[Any]:
    """Add every row of ``specs`` to ``report`` (a :class:`~spacl.studies.report.StudyReport`).

    Each row's ``measured`` and ``rule`` are evaluated on ``metrics``; a missing metric
    raises ``ValueError`` naming the claim.  Returns the report's new claims.
    """
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"claim keys must be unique, got {keys}")
    added = []
    for spec in specs:
        try:
            measured, verdict = spec.measured(metrics), spec.rule(metrics)
        except (KeyError, IndexError) as err:
            raise ValueError(f"claim {spec.key!r}: metric missing: {err}") from err
        added.append(
            report.claim(spec.key, spec.section, spec.claim, spec.paper, measured, verdict)
        )
    return added
