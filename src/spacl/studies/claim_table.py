"""Declarative claim tables of ``spacl reproduce``, judged by :mod:`spacl.studies.verdicts`.

A study lists :class:`ClaimSpec` rows (claim, the paper's number with its source, the
measured quantity, the rule), each a function of the study's metrics, and
:func:`evaluate_claims` turns them into the report's claims.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from spacl._validation import check_choice

if TYPE_CHECKING:
    from spacl.studies.verdicts import Verdict

__all__ = [
    "FOURTH_REVIEW_READ",
    "POST_HOC",
    "SOURCES",
    "ClaimSpec",
    "Metrics",
    "evaluate_claims",
    "refuted_earlier",
]

#: where a quoted number comes from (``ClaimSpec.source``)
SOURCES = ("paper", "SPEC", "authors' code", "none")

Metrics = Mapping[str, Any]

#: the note of a claim whose verdict a rule set after it had been read moved
#: (:attr:`ClaimSpec.earlier`), ``{}`` the earlier verdict
POST_HOC = "rule set after this verdict was read; earlier: {}"
#: the commit whose committed reports read the verdicts that issue 39's fourth review
#: reworded ("refuted as stated", a saturation curve rising at the range's top)
FOURTH_REVIEW_READ = "03e7086"


def refuted_earlier(before: str = "") -> str:
    """:attr:`ClaimSpec.earlier` of a claim refuted as stated
    (:data:`~spacl.studies.verdicts.REFUTED`) that read "not reproduced at this scale"
    in the reports at :data:`FOURTH_REVIEW_READ`; ``before``: what an earlier post-hoc
    rule had moved it from, if any.

    Example:
        >>> refuted_earlier("mixed (at 18aadd9)").endswith("so; before that mixed (at 18aadd9))")
        True
    """
    said = f"; before that {before}" if before else ""
    return (
        f"not reproduced at this scale (at {FOURTH_REVIEW_READ}, before a claim refuted as "
        f"stated was worded so{said})"
    )


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
        family: the family of claims read together (``None``: the claim is its own):
            the comparison tests of a family's claims are Holm-corrected together
            (:func:`spacl.studies.verdicts.holm_family`), and the report names it.
        family_note: what the report says of the family beside its name (when it was
            formed, if after the verdicts were read); the claims of a family may share one.
            On a claim outside any family: why it is decided apart from claims whose runs
            it shares (the report then names it as a family of its own).
        earlier: the verdict this claim read before a rule set after that verdict had
            been read moved it (issue 39: "mixed" kept for corrected tests, a claim for
            every regime or a bound in every temperature refuted in one, one partition of
            the bound claims); "" where no such rule moved it.  The measured cell then
            says so (:data:`POST_HOC`), so a reader sees which verdicts a post-hoc rule
            decided.
    """

    key: str
    section: str
    claim: str
    quoted: str
    source: str
    measured: Callable[[Metrics], str]
    rule: Callable[[Metrics], Verdict]
    family: str | None = None
    family_note: str = ""
    earlier: str = ""

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

    Each row's ``measured`` and ``rule`` are evaluated on ``metrics``; the claims of a
    family are decided together with Holm-adjusted p-values, a claim outside any family
    that runs more than one comparison test is a family of its own (Holm within the
    claim, :func:`~spacl.studies.verdicts.holm_within`), and ``report.families`` names
    each family with its claims and size.  A family's claim whose verdict decided alone
    (its own tests, Holm within the claim) differs from its family's says both in its
    measured cell: what the correction across claims changed.  A bound verdict's row
    note (how many runs break the bound, :attr:`~spacl.studies.verdicts.Verdict.row`) is
    added to the measured cell unless that cell already says it, and a claim whose verdict
    a post-hoc rule moved (:attr:`ClaimSpec.earlier`) says so there.  A missing metric raises
    ``ValueError`` naming the claim.  Returns the report's new claims.
    """
    from spacl.studies.verdicts import holm_family, holm_within

    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"claim keys must be unique, got {keys}")
    decided: dict[str, Verdict] = {}
    alone: dict[str, str] = {}  # a family's claim whose verdict alone differs: its row note
    families: dict[str, list[int]] = {}
    for i, spec in enumerate(specs):
        if spec.family is not None:
            families.setdefault(spec.family, []).append(i)
    first = len(report.claims) + 1  # the report number of specs[0]
    for name, rows in families.items():
        rules = [_bound_rule(specs[i], metrics) for i in rows]
        verdicts, size = _named(specs[rows[0]].key, partial(holm_family, name, rules))
        decided.update((specs[i].key, v) for i, v in zip(rows, verdicts, strict=True))
        for i, v in zip(rows, verdicts, strict=True):
            own = f"claim {first + i}"
            by_itself, _ = _named(
                specs[i].key, partial(holm_within, own, _bound_rule(specs[i], metrics))
            )
            if by_itself.verdict != v.verdict:
                alone[specs[i].key] = (
                    f"decided alone (its own tests, Holm within the claim): {by_itself.verdict}; "
                    f"in its family '{name}': {v.verdict}"
                )
        numbers = ", ".join(str(first + i) for i in rows)
        notes = dict.fromkeys(specs[i].family_note for i in rows if specs[i].family_note)
        said = "".join(f" ({note})" for note in notes)
        report.families.append(
            f"'{name}': claims {numbers}: {size} comparison test(s), Holm-corrected together{said}"
        )
    decided.update(_decide_apart(report, specs, metrics, first))
    report.shared_tests[:] = _shared_tests(specs, metrics, first)
    added = []
    for spec in specs:
        measured = _named(spec.key, partial(spec.measured, metrics))
        verdict = decided[spec.key]
        if verdict.row and not _said(verdict.row, measured):
            measured = f"{measured}; {verdict.row}"
        if spec.key in alone:
            measured = f"{measured} ({alone[spec.key]})"
        if spec.earlier:
            measured = f"{measured} ({POST_HOC.format(spec.earlier)})"
        added.append(
            report.claim(spec.key, spec.section, spec.claim, spec.paper, measured, verdict)
        )
    return added


def _decide_apart(
    report: Any, specs: Sequence[ClaimSpec], metrics: Metrics, first: int
) -> dict[str, Verdict]:
    """The verdicts of the claims outside any family, each its own family (Holm within
    the claim; a family of one where it runs one test), named in ``report.families``
    with the claims that run no comparison test.  ``first``: the number of ``specs[0]``."""
    from spacl.studies.verdicts import holm_within

    decided: dict[str, Verdict] = {}
    untested = []
    for i, spec in enumerate(specs):
        if spec.family is not None:
            continue
        own = f"claim {first + i}"
        verdict, size = _named(spec.key, partial(holm_within, own, _bound_rule(spec, metrics)))
        decided[spec.key] = verdict
        # the note of a claim decided apart from runs it shares says why
        said = f" ({spec.family_note})" if spec.family_note else ""
        if size > 1:
            report.families.append(
                f"'{own}' (`{spec.key}`): {size} comparison tests, Holm-corrected within the "
                f"claim{said}"
            )
        elif size == 1:
            report.families.append(
                f"'{own}' (`{spec.key}`): 1 comparison test, a family of one (its own "
                f"family: nothing to correct){said}"
            )
        else:
            untested.append(str(first + i))
    if untested:
        report.families.append(
            "no comparison test, so no family (a level, bound or saturation rule, or no "
            f"runs to test): claim(s) {', '.join(untested)}"
        )
    return decided


def _shared_tests(specs: Sequence[ClaimSpec], metrics: Metrics, first: int) -> list[str]:
    """The comparison tests that more than one claim runs on the same samples
    (:func:`~spacl.studies.verdicts.comparison_tests`), one line each: ``"claim 1's HSCL
    vs SCL is claim 2's beta=5 vs beta=0 (families 'claim 1' and 'claim 2')"``; each is
    counted in every family that runs it."""
    from spacl.studies.verdicts import comparison_tests

    seen: dict[Any, list[tuple[int, str, str]]] = {}
    for i, spec in enumerate(specs):
        tests = _named(spec.key, partial(comparison_tests, _bound_rule(spec, metrics)))
        family = spec.family or f"claim {first + i}"
        for identity, name in tests:
            claims = seen.setdefault(identity, [])
            if all(n != first + i for n, _, _ in claims):
                claims.append((first + i, name, family))
    lines = []
    for claims in seen.values():
        if len(claims) < 2:
            continue
        said = " is ".join(f"claim {n}'s {name}" for n, name, _ in claims)
        families = list(dict.fromkeys(f"'{family}'" for _, _, family in claims))
        where = (
            f"families {' and '.join(families)}"
            if len(families) > 1
            else f"both in family {families[0]}"
        )
        lines.append(f"{said} ({where})")
    return lines


def _said(row: str, measured: str) -> bool:
    """Whether the measured cell already states a verdict's row note: the whole note, or
    each of its ``"; "``-separated pieces (a part's ``"[<part>] "`` label aside), as a
    combined claim's note of parts whose cells already carry each part's note.

    Example:
        >>> _said("[a] 1 of 3 runs; [b] 0 of 3 runs", "a: 2.0 (1 of 3 runs) / b: 1.0 (0 of 3 runs)")
        True
        >>> _said("[a] 1 of 3 runs; [b] 2 of 3 runs", "a: 2.0 (1 of 3 runs)")
        False
    """
    if row in measured:
        return True
    pieces = [
        piece.split("] ", 1)[1] if piece.startswith("[") and "] " in piece else piece
        for piece in row.split("; ")
    ]
    return all(piece in measured for piece in pieces)


def _bound_rule(spec: ClaimSpec, metrics: Metrics) -> Callable[[], Verdict]:
    def rule() -> Verdict:
        return spec.rule(metrics)

    return rule


def _named(key: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, a missing metric raised as ``ValueError`` naming claim ``key``."""
    try:
        return fn()
    except (KeyError, IndexError) as err:
        raise ValueError(f"claim {key!r}: metric missing: {err}") from err
