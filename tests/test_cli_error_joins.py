"""Issue 38 (paper cuts): a hint added to an error message reads as prose: after a message
ending in a full stop it is a new sentence, never ``...directory.; if it moved``."""

from __future__ import annotations

from pathlib import Path

from spacl.commands import moved_data_error
from spacl.data.sources import dataset_not_found


def test_the_moved_data_hint_after_a_kg_not_found_message_is_a_new_sentence() -> None:
    searched = [Path("/data/kg/fb15k-237"), Path("/data/fb15k-237")]
    message = dataset_not_found("fb15k-237", searched, "knowledge graph")
    assert message.startswith("knowledge graph 'fb15k-237' not found") and message.endswith(".")
    err = moved_data_error(FileNotFoundError(message), "eval", Path("/runs/kg run"))
    text = str(err)
    assert ".;" not in text and ". ;" not in text
    assert text == (
        f"{message} If it moved since training: spacl eval '/runs/kg run' data.root=DIR"
    )
    assert "\n" not in text


def test_the_moved_data_hint_after_a_message_without_a_full_stop_follows_a_semicolon() -> None:
    err = moved_data_error(FileNotFoundError("gone"), "embed", Path("/runs/r"))
    assert str(err) == "gone; if it moved since training: spacl embed /runs/r data.root=DIR"
