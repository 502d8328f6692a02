"""Our ESD alpha (grok_lightning.stats.spectra.fit_power_law, the Clauset-Shalizi-Newman estimator
WeightWatcher delegates to ``powerlaw``) against the ``powerlaw`` package itself (dev extra)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from grok_lightning.stats.spectra import esd_eigenvalues, fit_power_law

powerlaw = pytest.importorskip("powerlaw", reason="the powerlaw package (dev extra) is not installed")


def _powerlaw_fit(values, xmin=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its own notes on numerics of the other distributions
        return powerlaw.Fit(values, xmin=xmin, verbose=False).power_law


def test_alpha_equals_powerlaw_at_the_same_xmin():
    """The estimator itself: alpha = 1 + n / sum ln(x / xmin) on the tail, as powerlaw's MLE."""
    rng = np.random.default_rng(0)
    for alpha in (1.5, 2.0, 3.0):
        sample = (1 - rng.random(2000)) ** (-1 / (alpha - 1))
        ours = fit_power_law(sample)
        theirs = _powerlaw_fit(sample, xmin=ours.xmin)
        assert ours.alpha == pytest.approx(theirs.alpha, rel=1e-10)
        assert abs(ours.alpha - alpha) < 0.15


def test_alpha_on_weight_spectra_agrees_with_powerlaw():
    """xmin chosen by each: the KS distances differ in convention (ours is the two-sided sup of
    the step function, powerlaw evaluates at the data points only and can pick another xmin), so
    alphas agree exactly where the two pick the same xmin and within alpha's standard error
    ((alpha - 1) / sqrt(n_tail)) otherwise."""
    same = 0
    for seed in range(6):
        torch.manual_seed(seed)
        weight = torch.randn(128, 512) @ torch.diag(torch.rand(512) ** -0.5)  # a heavy-tailed spectrum
        eig = esd_eigenvalues(weight)
        ours, theirs = fit_power_law(eig), _powerlaw_fit(eig)
        if ours.xmin == pytest.approx(theirs.xmin, rel=1e-12):
            same += 1
            assert ours.alpha == pytest.approx(theirs.alpha, rel=1e-10)
        assert abs(ours.alpha - theirs.alpha) < ours.sigma, (seed, ours, theirs.alpha, theirs.xmin)
    assert same >= 3
