"""grok_lightning: PyTorch Lightning reproduction of two grokking papers.

1. "Weight Decay Regimes in Grokking Transformers: Cheap Online Diagnostics" (arXiv 2605.20441).
2. "Feature Repulsion and Spectral Lock-in" (arXiv 2605.08119), testing Tian (2025) Theorem 6.

Floors (each imports only from those below it):

- ``cli``, ``reproduce/`` (outside the package): the verbs and the figure targets.
- ``sweep``: sweep files -> runs (``grid``), the results folder (``store``), launchers behind one
  registry (``launchers``: ``local_pool``, ``ray_pool``), one run's protocol (``worker``).
- ``run``: the only wiring of a run: datamodule, module, the evaluation pipeline and its
  callbacks, Trainer; ``ensembles``: E runs trained as one.
- ``modules``: ``GrokkingModule`` (any sequence model x modular arithmetic), ``TianModule``.
- ``callbacks``: the evaluation pipeline (``evaluation.ScheduledEvaluation``) and its
  contributors and consumers, checkpoints and stop signals (``resume``), interventions.
- ``diagnostics``: reading attention out of any model (``capture``, also used by the pipeline),
  and the callback for other people's models (``any_model``).
- ``metrics``, ``stats``, ``plots``, ``models``, ``data``: tensors and arrays in, numbers and
  figures out; no Lightning callback.
- ``records``, ``config``, ``package_data``: the per-run record (the contract between training and
  everything downstream), one-line validation, and the configs and reference data that ship in the
  package.
"""

__version__ = "0.1.0"
