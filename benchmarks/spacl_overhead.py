"""SPACL's cost next to NT-Xent on the same embeddings, with a breakdown.

Run: ``python benchmarks/spacl_overhead.py`` (defaults: B=256, V=5, d=128, float32, CPU,
one section per thread count in ``--threads``).

Timed interleaved in one run (median of ``--repeats`` rounds), forward + backward:

- ``NT-Xent``: ``NTXentLoss(0.1)(z)`` on ``z[B, V, d]`` (every view an anchor, SimCLR);
- ``SPACL (shared)``: the whole objective ``SPACLLoss()(None, z)`` in training mode —
  mining, one round of the generator game, the cut and the loss;
- ``SPACL (EMA)``: the engine's form ``loss(online[B, d], target[B, V, d],
  anchor_index=a)`` with ``a = loss.choose_anchor(target)`` included;
- ``SPACL (every view an anchor)``: ``anchor_set="every_view"`` (``B V`` anchors, as
  NT-Xent has), fused (issue 19: one mining pass, one game round, one cut, one kernel
  call; the loss on the kept negatives only, ``spacl.losses.spacl.compact``); ``SPACL (exp
  cut)``: the default with ``mass="exp"``;
- ``SupCon``: ``SupConLoss(0.1)(z, labels)`` with 10 classes, and beside it the
  supervised every-view SPACL the shipped recipes use
  (``positive_pool="instance_class", positive_mode="mean", anchor_set="every_view"``,
  ``detach_candidates=False``), on the same labels;

and the parts on their own, for the dynamic form and for the every-view form: mining
(dynamic anchor + farthest-point positives), the game (one ``D`` step + one ``G`` step;
every view: the same round, then one draw for the ``B V`` rows), the
relative-threshold cut, and for reference a full ``torch.sort`` of the same candidate
logits (what a sort-based cut would pay) and the bare similarity matmuls.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import torch

from _common import header, time_interleaved, write_result
from spacl.losses import NTXentLoss, SPACLLoss, SupConLoss
from spacl.losses.spacl.class_pool import class_blocks, class_logsumexp
from spacl.losses.spacl.mining import mine, mine_every, positives_of
from spacl.mining.cut import kernel as cut_kernel
from spacl.mining.pool import unit
from spacl.mining.positives import pool_dissimilarity


def met(ratio: float, bar: float) -> str:
    """``"met"`` or ``"**NOT met**"`` for a measured ratio against its bar."""
    return "met" if ratio <= bar else "**NOT met**"


def measure(b: int, v: int, d: int, repeats: int) -> tuple[str, dict[str, float]]:
    """One interleaved measurement at the current thread count: a markdown section and
    the target ratios (``"dynamic"``, ``"ema"`` vs NT-Xent; ``"every"``, ``"every_sup"``
    vs SupCon)."""
    g = torch.Generator().manual_seed(0)
    # a mildly structured pool: views of an instance near its centre, as after some training
    z = torch.randn(b, 1, d, generator=g) + 0.7 * torch.randn(b, v, d, generator=g)
    ntxent = NTXentLoss(0.1)
    spacl = SPACLLoss(0.1, embedding_dim=d)
    spacl_ema = SPACLLoss(0.1, embedding_dim=d)
    spacl_every = SPACLLoss(0.1, embedding_dim=d, anchor_set="every_view")
    spacl_exp = SPACLLoss(0.1, embedding_dim=d, mass="exp")
    labels = torch.randint(0, 10, (b,), generator=g)
    supcon = SupConLoss(0.1)
    spacl_every_sup = SPACLLoss(
        0.1,
        embedding_dim=d,
        anchor_set="every_view",
        positive_pool="instance_class",
        positive_mode="mean",
        detach_candidates=False,
    )
    adversarial = spacl.adversarial
    assert adversarial is not None

    def run_ntxent() -> None:
        ntxent(z.detach().requires_grad_(True)).backward()

    def run_spacl() -> None:
        spacl(None, z.detach().requires_grad_(True)).backward()

    def run_spacl_every() -> None:
        spacl_every(None, z.detach().requires_grad_(True)).backward()

    def on_tensor_path(fn: Callable[[], object]) -> Callable[[], None]:
        """``fn`` with the cut's tensor path (as with ``SPACL_CUT_KERNEL=0``)."""

        def run() -> None:
            cut_kernel.ENABLED = False
            try:
                fn()
            finally:
                cut_kernel.ENABLED = kernel_on

        return run

    kernel_on = cut_kernel.ENABLED

    def run_spacl_exp() -> None:
        spacl_exp(None, z.detach().requires_grad_(True)).backward()

    def run_supcon() -> None:
        supcon(z.detach().requires_grad_(True), labels).backward()

    def run_spacl_every_sup() -> None:
        spacl_every_sup(None, z.detach().requires_grad_(True), labels).backward()

    def run_spacl_ema() -> None:
        target = z.detach()
        a = spacl_ema.choose_anchor(target)
        online = z[torch.arange(b), a].detach().requires_grad_(True)
        spacl_ema(online, target, anchor_index=a).backward()

    # the parts, on the same inputs and code paths as inside the loss
    unit_pool = unit(z)
    rows = torch.arange(b)
    anchor = spacl.choose_anchor(z)
    _, flat_pos = positives_of(
        spacl.options, spacl.rng, unit_pool, anchor, None, pool_dissimilarity(unit_pool)
    )
    real = unit_pool.reshape(b * v, d)[flat_pos]
    logits = (unit_pool[rows, anchor] / 0.1) @ unit_pool.reshape(b * v, d).T
    candidates = rows.repeat_interleave(v).unsqueeze(0) != rows.unsqueeze(1)

    # the every-view parts: B V anchor rows against the B V pool views (+ K_adv)
    every_adv = spacl_every.adversarial
    assert every_adv is not None
    flat_unit = unit_pool.reshape(b * v, d)
    every_mined = mine_every(spacl_every.options, spacl_every.rng, z, None)
    every_pos, game_anchor = every_mined.flat_positives, every_mined.anchor
    game_rows = rows * v + game_anchor
    # the compact path's cut input: in-batch + one generated column, -inf at the own
    # instance's views, and the signed total from sums of the candidate embeddings
    every_keys = (flat_unit / 0.1) @ torch.cat((flat_unit, torch.zeros(1, d))).T
    own = (rows.repeat_interleave(v) * v).unsqueeze(1) + torch.arange(v)
    every_keys[:, : b * v].scatter_(1, own, -torch.inf)
    excluded = unit_pool.sum(1).repeat_interleave(v, 0)
    every_sum = ((flat_unit / 0.1) * (flat_unit.sum(0) - excluded)).sum(1)

    # the supervised every-view form's own parts: the cut on its keys (-inf at the
    # anchor's class) and the class positives (every view of the other same-class
    # instances: their logits read per class block, the log-sum-exp forward + backward)
    row_inst = rows.repeat_interleave(v)
    row_labels = labels.repeat_interleave(v)
    sup_keys = every_keys.clone()
    sup_keys[:, : b * v].masked_fill_(
        row_labels.unsqueeze(1) == row_labels.unsqueeze(0), -torch.inf
    )
    class_sums = torch.zeros(10, d).index_add_(0, row_labels, flat_unit)
    sup_sum = ((flat_unit / 0.1) * (flat_unit.sum(0) - class_sums[row_labels])).sum(1)

    def run_sup_cut() -> None:
        spacl_every_sup.cut.select(sup_keys, total=sup_sum, form="index")

    sup_logits = every_keys[:, : b * v].contiguous()  # before the class columns are cut
    columns = torch.arange(b * v)

    def run_class_positives() -> None:
        x = z.detach().requires_grad_(True)
        unit_x = x / x.norm(dim=2, keepdim=True)
        flat = unit_x.reshape(b * v, d)
        blocks = class_blocks(sup_logits, row_labels, row_inst, row_labels, row_inst, 10, columns)
        class_logsumexp(flat / 0.1, flat, blocks, tied=1 / 0.1).sum().backward()

    def run_every_mining() -> None:
        mine_every(spacl_every.options, spacl_every.rng, z, None)

    def run_every_game() -> None:
        every_adv.step(flat_unit[game_rows], flat_unit[every_pos[game_rows]])
        every_adv.sample(flat_unit)

    def run_every_cut() -> None:
        spacl_every.cut.select(every_keys, total=every_sum, form="index")

    def run_mining() -> None:
        mine(spacl.options, spacl.rng, z, None, None)

    def run_game() -> None:
        adversarial.play(unit_pool[rows, anchor], real)

    def run_cut() -> None:
        spacl.cut.select(logits, candidates)

    def run_sort() -> None:
        torch.sort(logits.masked_fill(~candidates, -torch.inf), dim=1, descending=True)

    def run_matmul_spacl() -> None:
        x = z.detach().requires_grad_(True)
        (x[:, 0] @ x.reshape(b * v, d).T).sum().backward()

    def run_matmul_ntxent() -> None:
        x = z.detach().requires_grad_(True).reshape(b * v, d)
        (x @ x.T).sum().backward()

    fns: dict[str, Callable[[], object]] = {
        "NT-Xent": run_ntxent,
        "SPACL (shared)": run_spacl,
        "SPACL (EMA)": run_spacl_ema,
        "SPACL (every view an anchor)": run_spacl_every,
        "SPACL (exp cut)": run_spacl_exp,
        "SupCon": run_supcon,
        "SPACL every view, supervised": run_spacl_every_sup,
        "every-view mining": run_every_mining,
        "every-view game": run_every_game,
        "every-view cut": run_every_cut,
        "every-view cut, tensor path": on_tensor_path(run_every_cut),
        "SPACL every view, tensor-path cut": on_tensor_path(run_spacl_every),
        "supervised cut": run_sup_cut,
        "class positives": run_class_positives,
        "mining": run_mining,
        "game": run_game,
        "cut": run_cut,
        "sort (reference)": run_sort,
        "matmul NT-Xent": run_matmul_ntxent,
        "matmul SPACL": run_matmul_spacl,
    }
    times = time_interleaved(fns, repeats, warmup=3)
    base = times["NT-Xent"]
    total = times["SPACL (shared)"]
    parts = ("mining", "game", "cut")
    rest = total - sum(times[p] for p in parts)
    logs = spacl.last.log_dict() if spacl.last is not None else {}
    every_logs = spacl_every.last.log_dict() if spacl_every.last is not None else {}
    every_total = times["SPACL (every view an anchor)"]
    every_parts = ("every-view mining", "every-view game", "every-view cut")
    every_rest = every_total - sum(times[p] for p in every_parts)
    sup_base = times["SupCon"]
    sup_total = times["SPACL every view, supervised"]
    sup_parts = ("every-view mining", "every-view game", "supervised cut", "class positives")
    sup_rest = sup_total - sum(times[p] for p in sup_parts)

    def sup_row(name: str, seconds: float) -> str:
        return (
            f"| {name} | {seconds * 1e3:.2f} | {seconds / sup_total:.0%} | "
            f"{seconds / sup_base:.2f}x |"
        )

    def every_row(name: str, seconds: float) -> str:
        return (
            f"| {name} | {seconds * 1e3:.2f} | {seconds / every_total:.0%} | "
            f"{seconds / sup_base:.2f}x |"
        )

    def row(name: str, seconds: float, share: bool = False) -> str:
        cells = [name, f"{seconds * 1e3:.2f}"]
        if share:
            cells.append(f"{seconds / total:.0%}")
        cells.append(f"{seconds / base:.2f}x")
        return "| " + " | ".join(cells) + " |"

    lines = [
        f"## {torch.get_num_threads()} thread(s)",
        "",
        "| objective | time (ms) | vs NT-Xent |",
        "|---|---|---|",
        *(
            row(n, times[n])
            for n in (
                "NT-Xent",
                "SPACL (shared)",
                "SPACL (EMA)",
                "SPACL (every view an anchor)",
                "SPACL (exp cut)",
            )
        ),
        "",
        "Every view an anchor (`B V` = "
        f"{b * v} anchor rows), side by side with SupCon in the same run:",
        "",
        "| objective | time (ms) | vs SupCon | vs NT-Xent |",
        "|---|---|---|---|",
        *(
            f"| {n} | {times[n] * 1e3:.2f} | {times[n] / sup_base:.2f}x | {times[n] / base:.2f}x |"
            for n in (
                "SupCon",
                "NT-Xent",
                "SPACL (every view an anchor)",
                "SPACL every view, supervised",
                "SPACL every view, tensor-path cut",
            )
        ),
        "",
        "`tensor-path cut`: the same loss with the cut's CPU kernel off "
        "(`SPACL_CUT_KERNEL=0`: group maxima and `topk`, the path GPUs take).",
        "",
        "Breakdown of SPACL (every view an anchor), each part timed on its own:",
        "",
        "| part | time (ms) | share of SPACL every view | vs SupCon |",
        "|---|---|---|---|",
        *(every_row(n, times[n]) for n in every_parts),
        every_row("loss: logits, kernel, backward (the remainder)", every_rest),
        every_row("(reference) every-view cut, tensor path", times["every-view cut, tensor path"]),
        "",
        'Breakdown of SPACL every view, supervised (`positive_pool="instance_class"`, '
        '`positive_mode="mean"`, labels), each part timed on its own (mining and game '
        "as above; the cut on its keys, the other same-class views masked out; the class "
        "positives' logits, forward and backward):",
        "",
        "| part | time (ms) | share of the supervised form | vs SupCon |",
        "|---|---|---|---|",
        *(sup_row(n, times[n]) for n in sup_parts),
        sup_row("loss: logits, kernel, backward (the remainder)", sup_rest),
        "",
        f"Every view: the cut kept {every_logs.get('spacl/kept_negatives', float('nan')):.1f} "
        f"of {every_logs.get('spacl/candidate_negatives', float('nan')):.0f} candidate "
        "negatives per anchor row on average.",
        "",
        "Breakdown of SPACL (shared), each part timed on its own:",
        "",
        "| part | time (ms) | share of SPACL | vs NT-Xent |",
        "|---|---|---|---|",
        *(row(n, times[n], share=True) for n in parts),
        row("loss: logits, kernel, backward (the remainder)", rest, share=True),
        "",
        "| reference point | time (ms) | vs NT-Xent |",
        "|---|---|---|",
        *(row(n, times[n]) for n in ("sort (reference)", "matmul NT-Xent", "matmul SPACL")),
        "",
        f"The cut kept {logs.get('spacl/kept_negatives', float('nan')):.1f} of "
        f"{logs.get('spacl/candidate_negatives', float('nan')):.0f} candidate negatives per "
        "anchor on average.",
        "",
        f"Target (issue 3): SPACL <= 2.0x NT-Xent (dynamic anchor: <= 1.2x, issue 19). "
        f"Measured: **{total / base:.2f}x** (shared encoder), "
        f"**{times['SPACL (EMA)'] / base:.2f}x** (EMA form): "
        f"{met(max(total, times['SPACL (EMA)']) / base, 1.2)}.",
        "",
        "Target (issue 19): SPACL every view <= 2.0x SupCon (1.5x the aim). Measured: "
        f"**{every_total / sup_base:.2f}x** (self-supervised form): "
        f"{met(every_total / sup_base, 2.0)}; "
        f"**{sup_total / sup_base:.2f}x** (supervised form): {met(sup_total / sup_base, 2.0)}.",
        "",
    ]
    ratios = {
        "dynamic": total / base,
        "ema": times["SPACL (EMA)"] / base,
        "every": every_total / sup_base,
        "every_sup": sup_total / sup_base,
    }
    return "\n".join(lines), ratios


def sessions_table(threads: int, ratios: list[dict[str, float]]) -> str:
    """The target ratios of every repeated session at one thread count (``--sessions``)."""
    lines = [
        f"### {threads} thread(s): the target ratios in each of {len(ratios)} sessions",
        "",
        "Each session is a whole measurement (its own warm-up and interleaved rounds), "
        "run one after another; the tables above are the last session's.",
        "",
        "| session | SPACL / NT-Xent | EMA / NT-Xent | every view / SupCon "
        "| supervised every view / SupCon |",
        "|---|---|---|---|---|",
        *(
            f"| {i + 1} | {r['dynamic']:.2f}x | {r['ema']:.2f}x | {r['every']:.2f}x "
            f"| {r['every_sup']:.2f}x |"
            for i, r in enumerate(ratios)
        ),
    ]
    for key, name, bar in (
        ("every", "every view (self-supervised form)", 2.0),
        ("every_sup", "supervised every view", 2.0),
    ):
        values = [r[key] for r in ratios]
        lines.append("")
        lines.append(
            f"{name}: {min(values):.2f}x to {max(values):.2f}x over the sessions "
            f"(<= {bar}x in {sum(x <= bar for x in values)} of {len(values)})."
        )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, 2],
        help="torch thread counts, one section each",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=1,
        help="repeat the whole measurement this many times per thread count and list "
        "every session's target ratios (the machine's run-to-run spread)",
    )
    parser.add_argument("--note", default="", help="a sentence on the machine's state, printed")
    parser.add_argument("--out", default="spacl_overhead")
    args = parser.parse_args()
    default_threads = torch.get_num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sections = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        runs = [
            measure(args.batch, args.views, args.dim, args.repeats) for _ in range(args.sessions)
        ]
        sections.append(runs[-1][0])
        if args.sessions > 1:
            sections.append(sessions_table(threads, [r for _, r in runs]))
    torch.set_num_threads(default_threads)
    text = "\n".join(
        [
            header("SPACL overhead vs NT-Xent"),
            f"B={args.batch}, V={args.views}, d={args.dim}, float32, CPU, training mode (one "
            f"generator round per call); forward + backward; median of {args.repeats} "
            "interleaved rounds.  Each section sets its own thread count (the header shows "
            "the machine default).  SPACL has one anchor per instance (SPEC §1.2), so its "
            "similarity matmul is `[B, d] x [d, B V]`, against NT-Xent's `[B V, d] x [d, B V]`. "
            "`sort (reference)` is one `torch.sort` of the masked candidate logits "
            "`[B, B V]`, what a sort-based cut would pay; the cut here sorts nothing (on CPU one "
            "compiled scan per row, `spacl.mining.cut.kernel`; elsewhere topk over group "
            "maxima; a radix-style bucket selection for long prefixes), and where it "
            "keeps few negatives the kernel runs on the kept ones only.  Where every view is "
            "an anchor on one encoder (NT-Xent, SupCon, SPACL every view) the `[B V, B V]` "
            "similarity matrix is symmetric and all three take it from its upper block "
            "triangle on one thread (`spacl.losses._mirror.mirrored_mm`, ~0.7 of a full "
            "matmul's time; the plain matmul on several threads); "
            "`matmul NT-Xent` below is the plain product, for reference.",
            "",
            f"The machine is shared: 1-minute load average {load:.1f} on "
            f"{os.cpu_count()} CPUs when the run started.  With more threads than free cores, "
            "OpenMP spin-waits inflate every small operation, which hurts SPACL (many small "
            "kernels) more than NT-Xent (a few large ones); the 1-thread section is the "
            "cleaner comparison." + (f"  {args.note}" if args.note else ""),
            "",
            *sections,
        ]
    )
    path = write_result(args.out, text)
    print(text)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
