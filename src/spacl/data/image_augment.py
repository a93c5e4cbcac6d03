"""Batched SimCLR-style augmentation of image tensors, driven by an explicit generator.

For in-memory images ``[N, C, H, W]`` in ``[0, 1]`` (digits, MNIST, CIFAR on the GPU)
the whole batch of ``b * V`` views is augmented at once - no Python loop per sample:

1. random resized crop + horizontal flip as one affine map per view, applied with
   ``affine_grid`` / ``grid_sample`` (bilinear, border padding): area fraction
   ``a ~ U(scale)``, log aspect ``~ U(log ratio)``, crop ``w = sqrt(a*H*W*r)``,
   ``h = sqrt(a*H*W/r)`` clamped to the image, centre uniform over valid positions;
2. with probability ``jitter_p`` colour jitter with per-view factors: brightness
   ``x*f``, contrast ``f*x + (1-f)*mean(gray(x))``, saturation
   ``f*x + (1-f)*gray(x)``, hue rotation in HSV by ``h`` turns, each clamped to
   ``[0, 1]``, factors ``f ~ U(1-j, 1+j)``, ``h ~ U(-j_h, j_h)``;
3. with probability ``gray_p`` grayscale (luma ``0.2989 R + 0.587 G + 0.114 B``, torchvision's);
4. with probability ``blur_p`` Gaussian blur, ``sigma ~ U(blur_sigma)``, kernel side
   about 10% of the image (SimCLR uses it on ImageNet; off by default for small images);
5. optional normalisation ``(x - mean) / std``.

This follows SimCLR (Chen et al. 2020, appendix A) and torchvision's
``RandomResizedCrop`` / ``ColorJitter`` / ``RandomGrayscale`` formulas.
**Decisions**: jitter is applied in the fixed order brightness, contrast, saturation,
hue (torchvision permutes the order per call); an impossible crop is clamped to the
image instead of torchvision's ten retries + centre-crop fallback. Single-channel
images skip saturation, hue and grayscale (no-ops for them).

``strength`` in ``[0, 1]`` scales every probability and magnitude and pulls the crop
range toward the full image: ``strength = 0`` is the identity map (up to float
rounding of the identity resample), which the tests check.

View layout (SPACL, SPEC 1.2): with ``keep_original=True`` view 0 is the original
image (only normalised) and views ``1..V-1`` are augmented, ``V = 1 + M``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .._validation import check_flag, check_in_range
from .labeled import LabeledData
from .views import Params, ViewMaker, check_num_views

__all__ = ["ImageAugment", "augment_images", "hsv_to_rgb", "rgb_to_hsv"]

_LUMA = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale weights
# CPU chunk size in values (~4 MB of float32): keeps temporaries cache/allocator friendly.
CPU_CHUNK_ELEMENTS = 1 << 20


def _pair(value: tuple[float, float], name: str, low: float, high: float) -> tuple[float, float]:
    if len(value) != 2:
        raise ValueError(f"{name} must be a pair (low, high), got {value!r}")
    a = check_in_range(value[0], f"{name}[0]", low, high)
    b = check_in_range(value[1], f"{name}[1]", low, high)
    if a > b:
        raise ValueError(f"{name} must satisfy low <= high, got {value!r}")
    return a, b


class ImageAugment(ViewMaker):
    """Batched SimCLR augmentation as a view maker (see module docstring).

    Args:
        strength: global scale in ``[0, 1]`` of all probabilities and magnitudes.
        scale: crop area fraction range (torchvision ``RandomResizedCrop.scale``).
        ratio: crop aspect-ratio range.
        flip_p: horizontal flip probability.
        jitter: ``(brightness, contrast, saturation, hue)`` magnitudes; SimCLR's
            colour strength ``s`` is ``(0.8s, 0.8s, 0.8s, 0.2s)``; CIFAR recipes use
            ``s = 0.5``, the default here.
        jitter_p: probability of applying colour jitter (SimCLR: 0.8).
        gray_p: probability of grayscale (SimCLR: 0.2).
        blur_p: probability of Gaussian blur (SimCLR ImageNet: 0.5; 0 for small images).
        blur_sigma: range of the blur's standard deviation in pixels (SimCLR: (0.1, 2.0)).
        mean, std: per-channel normalisation applied to every view (``None``: none).
        keep_original: view 0 is the un-augmented image.
    """

    def __init__(
        self,
        strength: float = 1.0,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        flip_p: float = 0.5,
        jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1),
        jitter_p: float = 0.8,
        gray_p: float = 0.2,
        blur_p: float = 0.0,
        blur_sigma: tuple[float, float] = (0.1, 2.0),
        mean: tuple[float, ...] | None = None,
        std: tuple[float, ...] | None = None,
        keep_original: bool = True,
    ) -> None:
        self.strength = check_in_range(strength, "strength", 0.0, 1.0)
        self.scale = _pair(scale, "scale", 0.0, 1.0)
        if self.scale[1] <= 0:
            raise ValueError(f"scale must have a positive upper bound, got {scale!r}")
        self.ratio = _pair(ratio, "ratio", 1e-6, 1e6)
        self.flip_p = check_in_range(flip_p, "flip_p", 0.0, 1.0)
        if len(jitter) != 4:
            raise ValueError(
                f"jitter must be (brightness, contrast, saturation, hue), got {jitter!r}"
            )
        for i, j in enumerate(jitter[:3]):
            check_in_range(j, f"jitter[{i}]", 0.0, 1.0)
        check_in_range(jitter[3], "jitter[3] (hue)", 0.0, 0.5)
        self.jitter = tuple(float(j) for j in jitter)
        self.jitter_p = check_in_range(jitter_p, "jitter_p", 0.0, 1.0)
        self.gray_p = check_in_range(gray_p, "gray_p", 0.0, 1.0)
        self.blur_p = check_in_range(blur_p, "blur_p", 0.0, 1.0)
        self.blur_sigma = _pair(blur_sigma, "blur_sigma", 1e-6, 1e3)
        if (mean is None) != (std is None):
            raise ValueError("mean and std must be given together")
        if std is not None and any(s <= 0 for s in std):
            raise ValueError(f"std must be > 0, got {std!r}")
        self.mean = mean
        self.std = std
        self.keep_original = check_flag(keep_original, "keep_original")

    # ------------------------------------------------------------- sampling
    def sample(
        self, data: LabeledData, index: Tensor, num_views: int, generator: torch.Generator
    ) -> Params:
        """Draw per-view parameters for ``len(index)`` instances (all on the CPU).

        Keys: ``crop [n, A, 4]`` (centre x, centre y, width, height as fractions of the
        image), ``flip [n, A]``, ``jitter [n, A, 4]`` (brightness, contrast, saturation
        factors and hue shift; neutral ``(1, 1, 1, 0)`` when not applied), ``gray [n, A]``,
        ``blur [n, A]`` (sigma in pixels, 0 = none); ``A`` = number of augmented views.
        """
        num_views = check_num_views(num_views)
        if len(data.input_shape) != 3:
            raise ValueError(
                f"ImageAugment needs images [N, C, H, W], got input shape {data.input_shape}"
            )
        _, height, width = data.input_shape
        n = len(index)
        aug = num_views - 1 if self.keep_original else num_views
        s = self.strength
        shape = (n, aug)

        def uniform(lo: float, hi: float, size: tuple[int, ...] = shape) -> Tensor:
            u = torch.rand(size, generator=generator, dtype=torch.float64)
            return lo + (hi - lo) * u

        def bernoulli(p: float) -> Tensor:
            return torch.rand(shape, generator=generator, dtype=torch.float64) < p * s

        # Crop: the range shrinks toward the full image as strength -> 0.
        lo_area = 1.0 - s * (1.0 - self.scale[0])
        hi_area = 1.0 - s * (1.0 - self.scale[1])
        area = uniform(lo_area, hi_area) * height * width
        log_r = uniform(s * math.log(self.ratio[0]), s * math.log(self.ratio[1]))
        r = torch.exp(log_r)
        w = torch.sqrt(area * r).clamp(max=width) / width
        h = torch.sqrt(area / r).clamp(max=height) / height
        cx = (uniform(0.0, 1.0) * (1.0 - w)) + w / 2
        cy = (uniform(0.0, 1.0) * (1.0 - h)) + h / 2
        crop = torch.stack([cx, cy, w, h], dim=-1)
        flip = bernoulli(self.flip_p)

        jb, jc, js, jh = (j * s for j in self.jitter)
        factors = torch.stack(
            [
                uniform(1 - jb, 1 + jb),
                uniform(1 - jc, 1 + jc),
                uniform(1 - js, 1 + js),
                uniform(-jh, jh),
            ],
            dim=-1,
        )
        apply_jitter = bernoulli(self.jitter_p).unsqueeze(-1)
        neutral = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
        jitter = torch.where(apply_jitter, factors, neutral)
        gray = bernoulli(self.gray_p)
        sigma = uniform(*self.blur_sigma)
        blur = torch.where(bernoulli(self.blur_p), sigma, torch.zeros_like(sigma))
        return {"crop": crop, "flip": flip, "jitter": jitter, "gray": gray, "blur": blur}

    # ----------------------------------------------------------------- apply
    def apply(self, data: LabeledData, index: Tensor, params: Params) -> Tensor:
        """Build ``[b, V, C, H, W]`` views; see the class docstring for the layout.

        On the CPU the instances are processed in chunks of about
        ``CPU_CHUNK_ELEMENTS`` values (a loop over chunks, not samples): huge
        temporaries page-fault on every elementwise op, and chunking measured ~3x
        faster there. On accelerators the whole batch goes in one pass.
        """
        x = data.inputs[index.to(data.device)]
        b, shape = x.shape[0], tuple(x.shape[1:])
        aug = int(params["crop"].shape[1])
        off = 1 if self.keep_original else 0
        norm = self._norm_tensors(x)
        out = x.new_empty((b, off + aug, *shape))
        per_instance = max(1, (off + aug) * x[0].numel())
        chunk = b if x.device.type != "cpu" else max(1, CPU_CHUNK_ELEMENTS // per_instance)
        for start in range(0, b, chunk):
            stop = min(b, start + chunk)
            xs = x[start:stop]
            if off:
                out[start:stop, 0] = xs if norm is None else (xs - norm[0]) / norm[1]
            if aug:
                m = stop - start
                rep = xs.unsqueeze(1).expand(m, aug, *shape).reshape(m * aug, *shape)
                flat = {k: v[start:stop].reshape(m * aug, *v.shape[2:]) for k, v in params.items()}
                views = augment_images(rep, **flat)
                if norm is not None:
                    views = (views - norm[0]) / norm[1]
                out[start:stop, off:] = views.reshape(m, aug, *shape)
        return out

    def _norm_tensors(self, x: Tensor) -> tuple[Tensor, Tensor] | None:
        if self.mean is None or self.std is None:
            return None
        c = x.shape[1]
        if len(self.mean) != c or len(self.std) != c:
            raise ValueError(f"mean/std have {len(self.mean)} entries, images have {c} channels")
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, c, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, c, 1, 1)
        return mean, std

    def __repr__(self) -> str:
        return (
            f"ImageAugment(strength={self.strength}, scale={self.scale}, flip_p={self.flip_p}, "
            f"jitter={self.jitter}, jitter_p={self.jitter_p}, gray_p={self.gray_p}, "
            f"blur_p={self.blur_p}, keep_original={self.keep_original})"
        )


def augment_images(
    images: Tensor,
    crop: Tensor,
    flip: Tensor,
    jitter: Tensor,
    gray: Tensor,
    blur: Tensor,
) -> Tensor:
    """Apply per-image augmentation parameters to ``images [n, C, H, W]`` (pure function).

    Parameter shapes: ``crop [n, 4]`` (cx, cy, w, h fractions), ``flip [n]`` bool,
    ``jitter [n, 4]``, ``gray [n]`` bool, ``blur [n]`` sigma (0: none). Output has the
    input's shape, dtype and device, values in ``[0, 1]`` for inputs in ``[0, 1]``.
    """
    n, c, height, width = images.shape
    dev, dt = images.device, images.dtype
    # Decide which optional stages run from the (CPU) parameters: no device sync.
    any_hue = bool((jitter[:, 3] != 0).any())
    any_blur = bool((blur > 0).any())
    crop = crop.to(device=dev, dtype=dt)
    cx, cy, w, h = crop.unbind(-1)
    sign = 1.0 - 2.0 * flip.to(device=dev, dtype=dt)
    # Output coords in [-1, 1] map to the crop box: x_in = (2cx - 1) + w * x_out.
    theta = torch.zeros(n, 2, 3, device=dev, dtype=dt)
    theta[:, 0, 0] = w * sign
    theta[:, 0, 2] = 2 * cx - 1
    theta[:, 1, 1] = h
    theta[:, 1, 2] = 2 * cy - 1
    grid = F.affine_grid(theta, [n, c, height, width], align_corners=False)
    out = F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)

    jit = jitter.to(device=dev, dtype=dt)
    bright, contrast, sat, hue = (jit[:, i].view(n, 1, 1, 1) for i in range(4))
    out = (out * bright).clamp(0, 1)
    mean_gray = _gray(out).mean(dim=(1, 2, 3), keepdim=True)
    out = (contrast * out + (1 - contrast) * mean_gray).clamp(0, 1)
    if c == 3:
        out = (sat * out + (1 - sat) * _gray(out)).clamp(0, 1)
        if any_hue:
            hsv = rgb_to_hsv(out)
            hsv = torch.cat([torch.remainder(hsv[:, :1] + hue, 1.0), hsv[:, 1:]], dim=1)
            out = hsv_to_rgb(hsv)
        g = gray.to(dev).view(n, 1, 1, 1)
        out = torch.where(g, _gray(out).expand_as(out), out)
    sigma = blur.to(device=dev, dtype=dt)
    if any_blur:
        out = _gaussian_blur(out, sigma)
    return out


def _gray(x: Tensor) -> Tensor:
    if x.shape[1] == 1:
        return x
    r, g, b = x.unbind(1)
    return (_LUMA[0] * r + _LUMA[1] * g + _LUMA[2] * b).unsqueeze(1)


def _gaussian_blur(x: Tensor, sigma: Tensor) -> Tensor:
    """Separable per-image Gaussian blur; ``sigma == 0`` leaves an image unchanged."""
    n, c, height, width = x.shape
    k = max(3, int(0.1 * min(height, width)) // 2 * 2 + 1)
    half = k // 2
    t = torch.arange(-half, half + 1, device=x.device, dtype=x.dtype)
    safe = sigma.clamp(min=1e-6).view(n, 1)
    kern = torch.exp(-0.5 * (t.view(1, -1) / safe) ** 2)
    delta = (t == 0).to(x.dtype).view(1, -1).expand(n, -1)
    kern = torch.where((sigma > 0).view(n, 1), kern / kern.sum(1, keepdim=True), delta)
    weight = kern.repeat_interleave(c, dim=0)  # [n*c, k]
    flat = x.reshape(1, n * c, height, width)
    flat = F.pad(flat, (half, half, 0, 0), mode="reflect" if width > half else "replicate")
    flat = F.conv2d(flat, weight.view(n * c, 1, 1, k), groups=n * c)
    flat = F.pad(flat, (0, 0, half, half), mode="reflect" if height > half else "replicate")
    flat = F.conv2d(flat, weight.view(n * c, 1, k, 1), groups=n * c)
    return flat.reshape(n, c, height, width)


def rgb_to_hsv(rgb: Tensor) -> Tensor:
    """``[n, 3, H, W]`` RGB in ``[0, 1]`` to HSV with hue in ``[0, 1)`` (vectorised)."""
    r, g, b = rgb.unbind(1)
    maxc, _ = rgb.max(dim=1)
    minc, _ = rgb.min(dim=1)
    delta = maxc - minc
    safe_delta = torch.where(delta > 0, delta, torch.ones_like(delta))
    safe_max = torch.where(maxc > 0, maxc, torch.ones_like(maxc))
    sat = delta / safe_max
    rc = (maxc - r) / safe_delta
    gc = (maxc - g) / safe_delta
    bc = (maxc - b) / safe_delta
    hue = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    hue = torch.remainder(hue / 6.0, 1.0)
    hue = torch.where(delta > 0, hue, torch.zeros_like(hue))
    return torch.stack([hue, sat, maxc], dim=1)


def hsv_to_rgb(hsv: Tensor) -> Tensor:
    """Inverse of :func:`rgb_to_hsv`."""
    h, s, v = hsv.unbind(1)
    h6 = h * 6.0
    i = torch.floor(h6)
    f = h6 - i
    i = torch.remainder(i, 6).long()
    p = v * (1 - s)
    q = v * (1 - s * f)
    t = v * (1 - s * (1 - f))
    # Rows: sector 0..5; columns: (r, g, b) choices among v, t, p, q.
    choices = torch.stack([v, q, p, t], dim=0)  # index 0=v 1=q 2=p 3=t
    table = torch.tensor(
        [[0, 3, 2], [1, 0, 2], [2, 0, 3], [2, 1, 0], [3, 2, 0], [0, 2, 1]], device=hsv.device
    )
    sel = table[i]  # [n, H, W, 3]
    out = torch.gather(choices.permute(1, 2, 3, 0), -1, sel)  # [n, H, W, 3]
    return out.permute(0, 3, 1, 2).clamp(0, 1)
