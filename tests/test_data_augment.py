"""Batched tensor augmentation against per-image loop references (torchvision, colorsys)."""

from __future__ import annotations

import colorsys

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from spacl.data import ImageAugment, LabeledData, augment_images, generator_for
from spacl.data.image_augment import hsv_to_rgb, rgb_to_hsv


def _imgs(n: int = 6, c: int = 3, h: int = 12, w: int = 12, dtype=torch.float64) -> torch.Tensor:
    return torch.rand((n, c, h, w), generator=torch.Generator().manual_seed(1), dtype=dtype)


def _neutral(n: int, dtype=torch.float64) -> dict[str, torch.Tensor]:
    return {
        "crop": torch.tensor([[0.5, 0.5, 1.0, 1.0]], dtype=dtype).repeat(n, 1),
        "flip": torch.zeros(n, dtype=torch.bool),
        "jitter": torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=dtype).repeat(n, 1),
        "gray": torch.zeros(n, dtype=torch.bool),
        "blur": torch.zeros(n, dtype=dtype),
    }


def _data(x: torch.Tensor) -> LabeledData:
    return LabeledData(x, torch.zeros(len(x), dtype=torch.long), None, 1, "imgs")


# ------------------------------------------------------------------ identity / range
@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_neutral_parameters_are_identity(dtype: torch.dtype, atol: float) -> None:
    x = _imgs(dtype=dtype)
    out = augment_images(x, **_neutral(len(x), dtype))
    torch.testing.assert_close(out, x, atol=atol, rtol=0)


@pytest.mark.parametrize("channels", [1, 3])
def test_zero_strength_is_identity(channels: int) -> None:
    x = _imgs(c=channels, dtype=torch.float64)
    aug = ImageAugment(strength=0.0, blur_p=1.0, keep_original=False)
    views = aug(_data(x), torch.arange(len(x)), 4, generator_for(0, "t"))
    assert views.shape == (len(x), 4, channels, 12, 12)
    torch.testing.assert_close(views, x.unsqueeze(1).expand_as(views), atol=1e-12, rtol=0)


@pytest.mark.parametrize("channels", [1, 3])
def test_full_strength_shape_range_and_variety(channels: int) -> None:
    x = _imgs(n=16, c=channels, h=32, w=32, dtype=torch.float32)
    aug = ImageAugment(blur_p=0.5)
    views = aug(_data(x), torch.arange(16), 5, generator_for(3, "t"))
    assert views.shape == (16, 5, channels, 32, 32) and views.dtype == torch.float32
    assert float(views.min()) >= 0.0 and float(views.max()) <= 1.0
    assert torch.equal(views[:, 0], x)  # view 0 is the original
    diffs = (views[:, 1:] - x.unsqueeze(1)).abs().flatten(2).amax(-1)
    assert bool((diffs > 1e-3).all())  # every augmented view differs from the original
    assert not torch.equal(views[:, 1], views[:, 2])


def test_normalisation_applies_mean_std_to_all_views() -> None:
    x = _imgs(n=4, dtype=torch.float64)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    plain = ImageAugment()(_data(x), torch.arange(4), 3, generator_for(5, "n"))
    normed = ImageAugment(mean=mean, std=std)(_data(x), torch.arange(4), 3, generator_for(5, "n"))
    m = torch.tensor(mean, dtype=x.dtype).view(1, 1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(1, 1, 3, 1, 1)
    torch.testing.assert_close(normed, (plain - m) / s)


# --------------------------------------------------------------------- geometry
def test_flip_of_full_image_is_exact_mirror() -> None:
    x = _imgs(dtype=torch.float64)
    p = _neutral(len(x))
    p["flip"] = torch.tensor([True, False, True, False, True, True])
    out = augment_images(x, **p)
    ref = torch.stack(
        [torch.flip(xi, dims=[-1]) if f else xi for xi, f in zip(x, p["flip"], strict=True)]
    )
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)


def test_crop_samples_linear_ramp_at_closed_form_coordinates() -> None:
    # Bilinear interpolation reproduces a linear function exactly, so every output pixel
    # must equal the ramp at the input coordinate the crop maps it to.
    h, w = 10, 14
    a, b, c = 0.011, 0.023, 0.2
    yy, xx = torch.meshgrid(
        torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij"
    )
    ramp = (a * xx + b * yy + c).expand(1, 3, h, w)
    n = 64
    aug = ImageAugment(scale=(0.2, 1.0))
    params = aug.sample(
        _data(ramp.expand(n, 3, h, w).clone()), torch.arange(n), 2, generator_for(1, "crop")
    )
    crop, flip = params["crop"][:, 0], params["flip"][:, 0]
    out = augment_images(
        ramp.expand(n, 3, h, w).contiguous(),
        crop,
        flip,
        _neutral(n)["jitter"],
        _neutral(n)["gray"],
        _neutral(n)["blur"],
    )
    ok = 0
    for i in range(n):  # loop reference
        cx, cy, cw, ch = crop[i].tolist()
        sign = -1.0 if bool(flip[i]) else 1.0
        for r in range(h):
            for q in range(w):
                xo, yo = (2 * q + 1) / w - 1, (2 * r + 1) / h - 1
                px = ((2 * cx - 1 + cw * sign * xo) + 1) * w / 2 - 0.5
                py = ((2 * cy - 1 + ch * yo) + 1) * h / 2 - 0.5
                if 0 <= px <= w - 1 and 0 <= py <= h - 1:
                    assert abs(float(out[i, 0, r, q]) - (a * px + b * py + c)) < 1e-12
                    ok += 1
    assert ok > n * h * w // 2


def test_crop_parameters_stay_inside_image_and_follow_ranges() -> None:
    n = 4000
    aug = ImageAugment(scale=(0.3, 0.9), ratio=(0.5, 2.0))
    x = torch.zeros(n, 3, 16, 16)
    p = aug.sample(_data(x), torch.arange(n), 2, generator_for(0, "stats"))
    cx, cy, w, h = p["crop"][:, 0].unbind(-1)
    assert bool(((cx - w / 2) >= -1e-12).all() and ((cx + w / 2) <= 1 + 1e-12).all())
    assert bool(((cy - h / 2) >= -1e-12).all() and ((cy + h / 2) <= 1 + 1e-12).all())
    area = w * h
    assert float(area.min()) >= 0.3 * 0.5 - 1e-9 and float(area.max()) <= 0.9 + 1e-9
    # Probabilities: flip 0.5, jitter 0.8, gray 0.2 (binomial, 5 sigma).
    for key, prob in (("flip", 0.5), ("gray", 0.2)):
        frac = float(p[key].double().mean())
        assert abs(frac - prob) < 5 * (prob * (1 - prob) / n) ** 0.5
    jittered = (p["jitter"][:, 0] != torch.tensor([1.0, 1.0, 1.0, 0.0])).any(-1)
    assert abs(float(jittered.double().mean()) - 0.8) < 5 * (0.16 / n) ** 0.5
    factors = p["jitter"][:, 0][jittered]
    assert float(factors[:, :3].min()) >= 0.6 and float(factors[:, :3].max()) <= 1.4
    assert float(factors[:, 3].abs().max()) <= 0.1


# ------------------------------------------------------------------------ colour
def test_hsv_roundtrip_matches_colorsys() -> None:
    x = _imgs(n=2, h=5, w=5)
    x[0, :, 0, 0] = 0.5  # gray pixel: hue and saturation 0
    x[0, :, 0, 1] = 0.0  # black
    hsv = rgb_to_hsv(x)
    for i in range(2):
        for r in range(5):
            for q in range(5):
                ref = colorsys.rgb_to_hsv(*x[i, :, r, q].tolist())
                torch.testing.assert_close(
                    hsv[i, :, r, q], torch.tensor(ref, dtype=x.dtype), atol=1e-12, rtol=0
                )
    torch.testing.assert_close(hsv_to_rgb(hsv), x, atol=1e-12, rtol=0)


@pytest.mark.parametrize("channels", [1, 3])
def test_jitter_matches_torchvision_per_image(channels: int) -> None:
    n = 8
    x = _imgs(n=n, c=channels)
    gen = torch.Generator().manual_seed(4)
    p = _neutral(n)
    p["jitter"] = torch.stack(
        [
            0.5 + torch.rand(n, generator=gen, dtype=torch.float64),
            0.5 + torch.rand(n, generator=gen, dtype=torch.float64),
            0.5 + torch.rand(n, generator=gen, dtype=torch.float64),
            0.2 * torch.rand(n, generator=gen, dtype=torch.float64) - 0.1,
        ],
        1,
    )
    p["gray"] = torch.tensor([True, False] * (n // 2))
    out = augment_images(x, **p)
    for i in range(n):  # loop reference with torchvision's functionals
        bf, cf, sf, hf = p["jitter"][i].tolist()
        ref = TF.adjust_brightness(x[i], bf)
        ref = TF.adjust_contrast(ref, cf)
        if channels == 3:
            ref = TF.adjust_saturation(ref, sf)
            ref = TF.adjust_hue(ref, hf)
            if bool(p["gray"][i]):
                ref = TF.rgb_to_grayscale(ref, num_output_channels=3)
        torch.testing.assert_close(out[i], ref, atol=1e-6, rtol=0)


def test_blur_matches_torchvision_gaussian_blur() -> None:
    n, size = 4, 40
    x = _imgs(n=n, h=size, w=size)
    p = _neutral(n)
    p["blur"] = torch.tensor([0.0, 0.5, 1.3, 2.0], dtype=torch.float64)
    out = augment_images(x, **p)
    k = int(0.1 * size) // 2 * 2 + 1
    torch.testing.assert_close(out[0], x[0], atol=1e-12, rtol=0)
    for i in range(1, n):
        s = float(p["blur"][i])
        ref = TF.gaussian_blur(x[i], kernel_size=[k, k], sigma=[s, s])
        torch.testing.assert_close(out[i], ref, atol=1e-10, rtol=0)


def test_bad_augment_arguments() -> None:
    with pytest.raises(ValueError, match="strength must be in"):
        ImageAugment(strength=1.5)
    with pytest.raises(ValueError, match="scale must satisfy low <= high"):
        ImageAugment(scale=(0.9, 0.2))
    with pytest.raises(ValueError, match=r"gray_p must be in \[0.0, 1.0\], got -0.1"):
        ImageAugment(gray_p=-0.1)
    with pytest.raises(ValueError, match="mean and std"):
        ImageAugment(mean=(0.5,))
    with pytest.raises(ValueError, match="channels"):
        ImageAugment(mean=(0.5, 0.5), std=(1.0, 1.0))(
            _data(_imgs()), torch.arange(2), 2, generator_for(0)
        )


def test_cpu_chunking_does_not_change_the_views(monkeypatch: pytest.MonkeyPatch) -> None:
    from spacl.data import image_augment

    x = _imgs(n=10, h=16, w=16, dtype=torch.float32)
    aug = ImageAugment(blur_p=0.5, mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.4))
    params = aug.sample(_data(x), torch.arange(10), 4, generator_for(8, "chunks"))
    one_pass = aug.apply(_data(x), torch.arange(10), params)
    monkeypatch.setattr(image_augment, "CPU_CHUNK_ELEMENTS", 3 * 4 * 3 * 16 * 16)  # 3 instances
    chunked = aug.apply(_data(x), torch.arange(10), params)
    assert torch.equal(chunked, one_pass)
