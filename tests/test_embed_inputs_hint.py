"""``TrainedModel.embed`` on images given as arrays the way PIL gives them: a one-line error
with the conversion to use, and read-only arrays taken without torch's warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from spacl.trained import TrainedModel

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(shape: tuple[int, int, int] = (3, 16, 16)) -> TrainedModel:
    """A ``TrainedModel`` as :func:`spacl.load` gives one, with an untrained linear encoder
    (the input checks do not depend on the weights: no run to train)."""
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(shape)), 4)).eval()
    return TrainedModel(
        encoder=encoder,
        head=nn.Linear(4, 2).eval(),
        config=OmegaConf.create({"name": "tiny", "data": {"name": "cifar10"}}),
        transform=lambda x: x,
        arm="main",
        input_shape=shape,
    )


def test_an_hwc_uint8_image_gets_the_conversion_in_one_line() -> None:
    model = tiny_model()
    pil_like = np.zeros((20, 20, 3), np.uint8)  # np.asarray(Image.open(...).convert("RGB"))
    with pytest.raises(ValueError) as err:
        model.embed(pil_like)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("inputs must have shape [N, 3, 16, 16], got (20, 20, 3)")
    assert "images as arrays are [N, 3, 16, 16] floats in [0, 1]" in message
    assert "x.transpose(2, 0, 1)[None] / 255" in message  # one image: add the batch axis
    assert "pass the PIL images in a list" in message  # 20 x 20 is not the model's size

    with pytest.raises(ValueError, match=r"x\.transpose\(0, 3, 1, 2\) / 255") as err:
        model.embed(np.zeros((5, 16, 16, 3), np.uint8))  # NHWC at the right size
    assert "\n" not in str(err.value) and "in a list" not in str(err.value)
    with pytest.raises(ValueError, match=r"for HWC images use x\.permute\(0, 3, 1, 2\)$"):
        model.embed(torch.zeros(5, 16, 16, 3))  # a float tensor: torch's spelling, no / 255
    with pytest.raises(ValueError, match=r"inputs\[1\] .*x\.transpose\(2, 0, 1\) / 255"):
        model.embed([np.zeros((3, 16, 16), np.float32), np.zeros((16, 16, 3), np.uint8)])


def test_a_grayscale_uint8_batch_gets_the_channel_axis_and_others_no_hint() -> None:
    model = tiny_model((1, 8, 8))
    with pytest.raises(ValueError, match=r"for PIL grayscale uint8 use x\[:, None\] / 255$"):
        model.embed(np.zeros((4, 8, 8), np.uint8))
    with pytest.raises(ValueError) as err:  # float channels-first at another size: no hint
        model.embed(np.zeros((4, 1, 9, 9), np.float32))
    assert str(err.value) == "inputs must have shape [N, 1, 8, 8], got (4, 1, 9, 9)"


def test_a_read_only_array_embeds_without_a_warning() -> None:
    model = tiny_model()
    x = np.random.default_rng(0).random((2, 3, 16, 16), dtype=np.float32)
    expected = model.embed(torch.from_numpy(x.copy()))
    x.flags.writeable = False  # as np.asarray of a PIL image, or a memory-mapped file
    rows = [x[0], x[1]]  # read-only views, one input each
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(model.embed(x), expected)
        torch.testing.assert_close(model.embed(rows), expected)
    assert not x.flags.writeable  # the caller's array is left as it was


def test_a_small_overshoot_of_0_1_is_taken_clamped() -> None:
    """A bicubic resize of float images gives values a little outside ``[0, 1]``
    (1.0001): taken within ``PIXEL_TOLERANCE`` and clamped, the caller's tensor untouched;
    further out it is refused, with the clamp as the way on."""
    from spacl.trained import PIXEL_TOLERANCE

    model = tiny_model()
    x = torch.rand(2, 3, 16, 16)
    over = x.clone()
    over[0, 0, 0, 0], over[1, 2, 3, 4] = 1.0001, -0.0004
    kept = over.clone()
    torch.testing.assert_close(model.embed(over), model.embed(over.clamp(0, 1)))
    assert torch.equal(over, kept)  # clamped on a copy
    torch.testing.assert_close(model.embed(over.numpy()), model.embed(over.clamp(0, 1)))
    over[0, 0, 0, 0] = 1 + 0.9 * PIXEL_TOLERANCE  # near the edge of the tolerance: taken
    torch.testing.assert_close(model.embed(over), model.embed(over.clamp(0, 1)))
    over[0, 0, 0, 0] = 1.05  # a larger overshoot: clamp it yourself
    with pytest.raises(ValueError, match=r"values in \[-0\.0004, 1\.05\] \(a little outside"):
        model.embed(over)
    with pytest.raises(ValueError, match=r"x\.clamp\(0, 1\)\)$"):
        model.embed(over)


def test_the_range_hint_fits_the_case() -> None:
    """0-255 pixels are told to divide by 255; negative values (images normalised with
    a mean and std already) are told to pass the raw pixels: dividing them by 255, as the
    hint once said, would be wrong."""
    model = tiny_model()
    x = torch.rand(2, 3, 16, 16)
    with pytest.raises(ValueError) as err:
        model.embed(x * 255)
    message = str(err.value)
    assert message.startswith("inputs must be images in [0, 1] as the run was trained on")
    assert message.endswith("(they look like 0-255 pixels: divide by 255)")
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    for normalised in ((x - mean) / std, x * 2 - 1):  # ImageNet's mean-std, and [-1, 1]
        with pytest.raises(ValueError) as err:
            model.embed(normalised)
        message = str(err.value)
        assert "255" not in message and "\n" not in message
        assert message.endswith(
            "(negative values: they look normalised already; pass the raw [0, 1] pixels, "
            "the model normalises them itself)"
        )
