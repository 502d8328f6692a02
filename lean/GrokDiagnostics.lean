/-
Root of the `GrokDiagnostics` library: bounds and identities behind the cheap online
attention diagnostics of "Weight Decay Regimes in Grokking Transformers" (arXiv 2605.20441).
Python counterparts: `grok_lightning/metrics/functional.py`; numerical checks of the same
statements: `tests/test_metrics_attention.py`.
-/
import GrokDiagnostics.Std
import GrokDiagnostics.Cosine
import GrokDiagnostics.Entropy
import GrokDiagnostics.Participation
import GrokDiagnostics.Rank
import GrokDiagnostics.Regimes
