"""Metrics: attention-head order parameters of arXiv 2605.20441 (torchmetrics style).

``functional`` holds the kernels; ``attention`` the :class:`torchmetrics.Metric` wrappers;
``participation`` the PR_norm covariance constructions; ``head_clusters`` the head-role clusters
of the heads' output vectors (section 5).
"""
from grok_lightning.metrics.attention import (
    AttentionStatistics,
    EntropyMean,
    EntropyRange,
    EntropyStd,
    HeadParticipationRatio,
    MeanSimilarity,
    ParticipationRatio,
    SpectralGap,
    attention_metric_collection,
)
from grok_lightning.metrics.functional import (
    STAT_KEYS,
    attention_statistics,
    check_participation_identity,
    coefficient_of_variation,
    entropy_mean,
    entropy_range,
    entropy_std,
    head_cosine_matrix,
    head_entropies,
    head_participation_ratio,
    mean_similarity,
    normalize_participation_ratio,
    participation_identity_error,
    participation_ratio,
    participation_ratio_from_cv,
    qk_rank,
    spectral_gap,
)
from grok_lightning.metrics.head_clusters import (
    HEAD_CLUSTER_POSITIONS,
    HEAD_CLUSTER_THRESHOLD,
    HeadClusterCount,
    head_cluster_count,
    head_cluster_labels,
    head_cosine_distance,
    head_output_gram,
    head_output_gram_update,
    head_output_grams,
)
from grok_lightning.metrics.participation import DEFAULT_PR_CONSTRUCTION, PR_CONSTRUCTIONS, head_participation

# spectral lock-in metrics: see repulsion.py / spectrum.py

__all__ = [
    "AttentionStatistics",
    "EntropyMean",
    "EntropyRange",
    "EntropyStd",
    "HEAD_CLUSTER_POSITIONS",
    "HEAD_CLUSTER_THRESHOLD",
    "HeadClusterCount",
    "HeadParticipationRatio",
    "SpectralGap",
    "MeanSimilarity",
    "DEFAULT_PR_CONSTRUCTION",
    "PR_CONSTRUCTIONS",
    "ParticipationRatio",
    "STAT_KEYS",
    "attention_metric_collection",
    "attention_statistics",
    "check_participation_identity",
    "coefficient_of_variation",
    "head_cluster_count",
    "head_cluster_labels",
    "head_cosine_distance",
    "head_cosine_matrix",
    "head_output_gram",
    "head_output_gram_update",
    "head_output_grams",
    "head_entropies",
    "entropy_mean",
    "entropy_range",
    "entropy_std",
    "head_participation",
    "head_participation_ratio",
    "spectral_gap",
    "mean_similarity",
    "normalize_participation_ratio",
    "participation_identity_error",
    "participation_ratio",
    "participation_ratio_from_cv",
    "qk_rank",
]
