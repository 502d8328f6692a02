"""Statistics for the weight-decay-regimes paper: every number with a CI comes from here.

Independent of training: everything works on plain arrays; ``records_to_arrays`` turns run
records into them. See ``docs/statistics.md`` for the formulas and the golden numbers.

- :mod:`.critical`   lambda_c: the published least-squares logistic + run bootstrap
  (``method="paper"``) and a binomial GLM (``method="glm"``); Wilson bin intervals.
- :mod:`.curves`     nu of t_grok = A (lambda - lambda_c)^-nu, tanh rise, d/H model selection.
- :mod:`.relaxation` AdamW norm relaxation fit and the horizon bound on lambda_c.
- :mod:`.regimes`    grok / no-grok / collapse / diverged label of a run (Fig. 1, Fig. 9).
- :mod:`.trajectory` RMS distance of the median s_bar, sigma_H and test-accuracy curves to the
  paper's Fig. 2 (read off the published figure).
- :mod:`.significance` paired t / Wilcoxon / Cohen's d / bootstrap CI, Bonferroni/Holm,
  permutation test, two-sample Cohen's d, Pearson r with Fisher-z CI.
"""

from .arrays import records_to_arrays
from .critical import CriticalFit, fit_critical_weight_decay, logistic_log10
from .curves import (
    PowerLawFit,
    TanhFit,
    fit_saturation_models,
    fit_tanh_rise,
    fit_time_to_grok_power_law,
    jackknife_ci,
    tanh_rise,
)
from .phases import PhaseSummary, peak_entropy_std, phase_summary
from .regimes import REGIMES, CollapseCriterion, classify_run, regime_counts
from .relaxation import (
    P_RELAX_LEVELS,
    PAPER_LR,
    PAPER_T_MAX,
    RelaxationFit,
    adamw_bound,
    adamw_bound_table,
    fit_exponential_relaxation,
    kappa_from_rate,
    relaxation_curve,
)
from .significance import (
    MIN_PAIRS_COHEN_D,
    PairedComparison,
    PermutationResult,
    cohens_d,
    cohens_d_ci,
    correct,
    paired_comparison,
    paired_d_ci,
    pearson_r,
    permutation_p_floor,
    permutation_test,
)

__all__ = [
    "PhaseSummary", "peak_entropy_std", "phase_summary",
    "records_to_arrays",
    "REGIMES", "CollapseCriterion", "classify_run", "regime_counts",
    "CriticalFit", "fit_critical_weight_decay", "logistic_log10",
    "PowerLawFit", "TanhFit", "fit_saturation_models", "fit_tanh_rise",
    "fit_time_to_grok_power_law", "jackknife_ci", "tanh_rise",
    "P_RELAX_LEVELS", "PAPER_LR", "PAPER_T_MAX", "RelaxationFit", "adamw_bound",
    "adamw_bound_table", "fit_exponential_relaxation", "kappa_from_rate", "relaxation_curve",
    "MIN_PAIRS_COHEN_D", "PairedComparison", "PermutationResult", "cohens_d", "cohens_d_ci", "paired_d_ci", "correct", "paired_comparison",
    "pearson_r", "permutation_p_floor", "permutation_test",
]

# checkpoint spectra for the long-horizon figures: ESD alpha, the C1 / Table 3 identity
from .spectra import (  # noqa: E402
    ESDFit,
    ModelESD,
    esd_alpha,
    esd_eigenvalues,
    fit_power_law,
    head_covariance_eigenvalues,
    model_esd_alpha,
    pr_identity_rows,
    pr_norm_checkpoint_table,
)

__all__ += ["ESDFit", "ModelESD", "esd_alpha", "esd_eigenvalues", "fit_power_law", "head_covariance_eigenvalues",
            "model_esd_alpha", "pr_identity_rows", "pr_norm_checkpoint_table"]
