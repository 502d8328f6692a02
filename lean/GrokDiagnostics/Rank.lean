import Mathlib

/-!
# Rank of the attention score kernel (the paper's E1)

For one head with queries `Q` and keys `K` in `ℝ^{T × d_h}`, the score matrix `Q Kᵀ` has
rank at most `d_h` (and at most `T`): `rank (A B) ≤ rank A ≤ #columns of A`.

Python: `qk_rank` in `grok_lightning/metrics/functional.py`.
-/

namespace GrokDiagnostics

open Matrix

/-- **E1**: `rank (Q Kᵀ) ≤ d_h`. -/
theorem qk_rank_le {T d : ℕ} (Q K : Matrix (Fin T) (Fin d) ℝ) : (Q * Kᵀ).rank ≤ d :=
  (Matrix.rank_mul_le_left Q Kᵀ).trans (Matrix.rank_le_width Q)

/-- and `rank (Q Kᵀ) ≤ T`. -/
theorem qk_rank_le_seq {T d : ℕ} (Q K : Matrix (Fin T) (Fin d) ℝ) : (Q * Kᵀ).rank ≤ T :=
  (Matrix.rank_mul_le_right Q Kᵀ).trans (Matrix.rank_le_width Kᵀ)

end GrokDiagnostics
