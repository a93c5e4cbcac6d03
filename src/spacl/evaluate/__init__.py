"""Evaluation of frozen representations: linear probe, weighted kNN, nearest class centre.

=================================  =========================================================
``knn_accuracy(train_f, train_y,    weighted kNN (InstDisc), ``k = 200``, ``t = 0.1``
test_f, test_y, k, t)``
``nearest_centre_accuracy(...)``    nearest class mean (NC4's classifier)
``linear_probe(...)``               L2 multinomial logistic regression, full-batch L-BFGS
``extract_features(model, data)``   frozen features (backbone or projections), eval mode
``evaluate_representation(...)``    all of the above + ``spacl.geometry`` scalars
``evaluate_link_prediction(...)``   filtered MRR / Hits@k over both directions
``fit_open_classifier(...)``        open-intent (OOD) decision from class centres
``open_intent_metrics(...)``        accuracy, macro-F1, F1-OOD, F1-IND
``fit_adb(features, labels, ...)``  ADB (Zhang et al. 2021): learned radii around centroids
=================================  =========================================================

Train and test features of different float dtypes are promoted to the wider one (never
narrowed); features of different widths are a ``ValueError`` naming both arguments.
"""

from spacl.evaluate.adb import ADBModel, fit_adb
from spacl.evaluate.features import extract_features, unwrap_model
from spacl.evaluate.knn import knn_accuracy, knn_predict
from spacl.evaluate.linear import LinearProbeResult, linear_probe
from spacl.evaluate.ncc import class_centres, nearest_centre_accuracy, nearest_centre_predict
from spacl.evaluate.ood import OpenClassifier, fit_open_classifier, open_intent_metrics
from spacl.evaluate.ranking import evaluate_link_prediction, filtered_ranks, ranking_metrics
from spacl.evaluate.report import evaluate_representation, geometry_available, geometry_summary

__all__ = [
    "ADBModel",
    "LinearProbeResult",
    "OpenClassifier",
    "class_centres",
    "evaluate_link_prediction",
    "evaluate_representation",
    "extract_features",
    "filtered_ranks",
    "fit_adb",
    "fit_open_classifier",
    "geometry_available",
    "geometry_summary",
    "knn_accuracy",
    "knn_predict",
    "linear_probe",
    "nearest_centre_accuracy",
    "nearest_centre_predict",
    "open_intent_metrics",
    "ranking_metrics",
    "unwrap_model",
]
