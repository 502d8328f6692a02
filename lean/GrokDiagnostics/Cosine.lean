import Mathlib
import GrokDiagnostics.Std

/-!
# Cosine similarity between head patterns

* `cosineSim_mem_Icc`: the cosine of two vectors of a real inner-product space is in
  `[-1, 1]` (Mathlib's `abs_real_inner_div_norm_mul_norm_le_one`), so `s_bar`, an average
  of such cosines, is in `[-1, 1]` (`sbar_mem_Icc`).
* The implementation computes the cosine from a Gram matrix with the published
  `x / (‖x‖ + ε)` normalisation: `G_ij / ((√G_ii + ε)(√G_jj + ε))` (`gramCosine`). It is
  `≥ 0` when the Gram entry is (attention probabilities are non-negative, so every entry of
  their Gram matrix is, `dot_nonneg`) and `≤ 1` for Gram entries of any inner-product space
  (`innerGramCosine_le_one`). Hence `s_bar ∈ [0, 1]` on attention probabilities.

Python: `mean_similarity`, `_cosine_from_gram` in `grok_lightning/metrics/functional.py`.
-/

namespace GrokDiagnostics

section InnerProduct

variable {F : Type*} [NormedAddCommGroup F] [InnerProductSpace ℝ F]

/-- Cosine similarity `⟪x, y⟫ / (‖x‖ ‖y‖)` (Mathlib's convention: `0` if a vector is `0`). -/
noncomputable def cosineSim (x y : F) : ℝ := ⟪x, y⟫_ℝ / (‖x‖ * ‖y‖)

theorem abs_cosineSim_le_one (x y : F) : |cosineSim x y| ≤ 1 :=
  abs_real_inner_div_norm_mul_norm_le_one x y

theorem cosineSim_mem_Icc (x y : F) : cosineSim x y ∈ Set.Icc (-1 : ℝ) 1 :=
  Set.mem_Icc.mpr (abs_le.mp (abs_cosineSim_le_one x y))

/-- `s_bar` (an average of pairwise cosines over head pairs, then over layers) is in `[-1, 1]`. -/
theorem sbar_mem_Icc {ρ : Type*} [Fintype ρ] [Nonempty ρ] (pairs : ρ → F × F) :
    mean (fun r => cosineSim (pairs r).1 (pairs r).2) ∈ Set.Icc (-1 : ℝ) 1 :=
  mean_mem_Icc _ fun r => cosineSim_mem_Icc _ _

end InnerProduct

section Gram

/-- One Gram entry `∑ k, x k * y k` of the flattened head patterns. -/
noncomputable def dot {N : ℕ} (x y : Fin N → ℝ) : ℝ := ∑ k, x k * y k

theorem dot_nonneg {N : ℕ} {x y : Fin N → ℝ} (hx : ∀ k, 0 ≤ x k) (hy : ∀ k, 0 ≤ y k) :
    0 ≤ dot x y :=
  Finset.sum_nonneg fun k _ => mul_nonneg (hx k) (hy k)

/-- The implementation's cosine from Gram entries, with the published `ε = 1e-12`. -/
noncomputable def gramCosine (gij gii gjj ε : ℝ) : ℝ :=
  gij / ((Real.sqrt gii + ε) * (Real.sqrt gjj + ε))

theorem gramCosine_nonneg {gij gii gjj ε : ℝ} (hg : 0 ≤ gij) (hε : 0 ≤ ε) :
    0 ≤ gramCosine gij gii gjj ε :=
  div_nonneg hg (mul_nonneg (add_nonneg (Real.sqrt_nonneg _) hε)
    (add_nonneg (Real.sqrt_nonneg _) hε))

lemma gd_div_le_one {a b : ℝ} (h : a ≤ b) (hb : 0 ≤ b) : a / b ≤ 1 := by
  rcases hb.lt_or_eq with hb' | hb'
  · rw [div_eq_mul_inv]
    calc a * b⁻¹ ≤ b * b⁻¹ := mul_le_mul_of_nonneg_right h (inv_nonneg.mpr hb)
      _ = 1 := mul_inv_cancel₀ hb'.ne'
  · rw [← hb', div_zero]
    exact zero_le_one

/-- Given Cauchy–Schwarz for the Gram entries, the `ε`-cosine is at most `1`. -/
theorem gramCosine_le_one {gij gii gjj ε : ℝ} (hcs : gij ≤ Real.sqrt gii * Real.sqrt gjj)
    (hε : 0 ≤ ε) : gramCosine gij gii gjj ε ≤ 1 := by
  have hi : 0 ≤ Real.sqrt gii + ε := add_nonneg (Real.sqrt_nonneg _) hε
  have hj : 0 ≤ Real.sqrt gjj + ε := add_nonneg (Real.sqrt_nonneg _) hε
  have hle : Real.sqrt gii * Real.sqrt gjj ≤ (Real.sqrt gii + ε) * (Real.sqrt gjj + ε) :=
    mul_le_mul (le_add_of_nonneg_right hε) (le_add_of_nonneg_right hε) (Real.sqrt_nonneg _) hi
  exact gd_div_le_one (hcs.trans hle) (mul_nonneg hi hj)

/-- Gram entries of an inner-product space satisfy Cauchy–Schwarz, so their `ε`-cosine is
at most `1`. -/
theorem innerGramCosine_le_one {F : Type*} [NormedAddCommGroup F] [InnerProductSpace ℝ F]
    (x y : F) {ε : ℝ} (hε : 0 ≤ ε) : gramCosine ⟪x, y⟫_ℝ ⟪x, x⟫_ℝ ⟪y, y⟫_ℝ ε ≤ 1 := by
  refine gramCosine_le_one ?_ hε
  rw [real_inner_self_eq_norm_sq, real_inner_self_eq_norm_sq, Real.sqrt_sq (norm_nonneg x),
    Real.sqrt_sq (norm_nonneg y)]
  exact real_inner_le_norm x y

end Gram

end GrokDiagnostics
