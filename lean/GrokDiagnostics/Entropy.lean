import Mathlib
import GrokDiagnostics.Std

/-!
# Shannon entropy of an attention row: `0 ≤ H(p) ≤ log n`

For a probability vector `p` on `n` keys, `H(p) = ∑ -p_i log p_i` (Mathlib's
`Real.negMulLog`). Non-negativity: each `negMulLog p_i ≥ 0` on `[0, 1]`. Upper bound:
Jensen for the concave `negMulLog` with uniform weights `1/n`. A per-head entropy is an
average of row entropies, so it lies in `[0, log n]` too (`meanEntropy_mem_Icc`).

The implementation uses `-∑ a log(a + 1e-12)`, which differs from `H` by at most `n·1e-12`
(not formalised; the Python property test allows that slack).

Python: `entropy_mean`, `head_entropies` in `grok_lightning/metrics/functional.py`.
-/

namespace GrokDiagnostics

variable {ι : Type*} [Fintype ι]

/-- Shannon entropy in nats. -/
noncomputable def entropy (p : ι → ℝ) : ℝ := ∑ i, Real.negMulLog (p i)

theorem le_one_of_prob {p : ι → ℝ} (h0 : ∀ i, 0 ≤ p i) (h1 : ∑ i, p i = 1) (i : ι) :
    p i ≤ 1 := by
  have h := Finset.single_le_sum (f := p) (fun j _ => h0 j) (Finset.mem_univ i)
  rwa [h1] at h

theorem entropy_nonneg {p : ι → ℝ} (h0 : ∀ i, 0 ≤ p i) (h1 : ∑ i, p i = 1) :
    0 ≤ entropy p :=
  Finset.sum_nonneg fun i _ => Real.negMulLog_nonneg (h0 i) (le_one_of_prob h0 h1 i)

theorem entropy_le_log_card [Nonempty ι] {p : ι → ℝ} (h0 : ∀ i, 0 ≤ p i)
    (h1 : ∑ i, p i = 1) : entropy p ≤ Real.log (Fintype.card ι) := by
  have hn : (0 : ℝ) < Fintype.card ι := by exact_mod_cast Fintype.card_pos
  have hw : ∑ _i : ι, (Fintype.card ι : ℝ)⁻¹ = 1 := by
    rw [Finset.sum_const, Finset.card_univ, nsmul_eq_mul, mul_inv_cancel₀ hn.ne']
  have hJ := Real.concaveOn_negMulLog.le_map_sum (t := Finset.univ)
    (w := fun _ : ι => (Fintype.card ι : ℝ)⁻¹) (p := p)
    (fun _ _ => inv_nonneg.mpr (Nat.cast_nonneg _)) hw (fun i _ => Set.mem_Ici.mpr (h0 i))
  simp only [smul_eq_mul] at hJ
  rw [← Finset.mul_sum, ← Finset.mul_sum, h1, mul_one] at hJ
  -- hJ : n⁻¹ * ∑ negMulLog (p i) ≤ negMulLog n⁻¹ = n⁻¹ * log n
  have hval : Real.negMulLog (Fintype.card ι : ℝ)⁻¹
      = (Fintype.card ι : ℝ)⁻¹ * Real.log (Fintype.card ι) := by
    simp only [Real.negMulLog, Real.log_inv]
    ring
  rw [hval] at hJ
  exact le_of_mul_le_mul_left hJ (inv_pos.mpr hn)

/-- Every row entropy of an attention pattern over `n` keys lies in `[0, log n]`. -/
theorem entropy_mem_Icc [Nonempty ι] {p : ι → ℝ} (h0 : ∀ i, 0 ≤ p i) (h1 : ∑ i, p i = 1) :
    entropy p ∈ Set.Icc 0 (Real.log (Fintype.card ι)) :=
  Set.mem_Icc.mpr ⟨entropy_nonneg h0 h1, entropy_le_log_card h0 h1⟩

/-- A per-head entropy (the mean over batch and query rows of row entropies) lies in
`[0, log n]`; so do their mean and their range's endpoints. -/
theorem meanEntropy_mem_Icc [Nonempty ι] {ρ : Type*} [Fintype ρ] [Nonempty ρ]
    (rows : ρ → ι → ℝ) (h0 : ∀ r i, 0 ≤ rows r i) (h1 : ∀ r, ∑ i, rows r i = 1) :
    mean (fun r => entropy (rows r)) ∈ Set.Icc 0 (Real.log (Fintype.card ι)) :=
  mean_mem_Icc _ fun r => entropy_mem_Icc (h0 r) (h1 r)

end GrokDiagnostics
