"""grok_lightning: PyTorch Lightning reproduction of two grokking papers.

1. "Weight Decay Regimes in Grokking Transformers: Cheap Online Diagnostics" (arXiv 2605.20441).
2. "Feature Repulsion and Spectral Lock-in" (arXiv 2605.08119), testing Tian (2025) Theorem 6.
"""

__version__ = "0.1.0"
