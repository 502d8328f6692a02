import Mathlib

/-!
# Means, variances and the standard deviation over heads

`sigma_H` is the population standard deviation (numpy `ddof = 0`) of the per-head mean
entropies. We prove it is non-negative, that it vanishes when all heads agree (the collapse
signature), the sample/population variance conversion used to read the paper's Table 3, and
that an average of values in `[lo, hi]` stays in `[lo, hi]` (used for `s_bar` and for the
per-head entropies, which are averages over batch and query rows).

Python: `grok_lightning.metrics.functional` (`entropy_std`, `participation_ratio_from_cv`).
-/

namespace GrokDiagnostics

variable {ι : Type*} [Fintype ι]

/-- Arithmetic mean `(∑ a) / n`. -/
noncomputable def mean (a : ι → ℝ) : ℝ := (∑ i, a i) / Fintype.card ι

/-- Population variance (numpy's default `ddof = 0`). -/
noncomputable def popVar (a : ι → ℝ) : ℝ := (∑ i, (a i - mean a) ^ 2) / Fintype.card ι

/-- Sample variance (`ddof = 1`, torch's `unbiased = True`). -/
noncomputable def sampleVar (a : ι → ℝ) : ℝ :=
  (∑ i, (a i - mean a) ^ 2) / ((Fintype.card ι : ℝ) - 1)

/-- Population standard deviation; `sigma_H` is this over the per-head entropies. -/
noncomputable def popStd (a : ι → ℝ) : ℝ := Real.sqrt (popVar a)

theorem popVar_nonneg (a : ι → ℝ) : 0 ≤ popVar a :=
  div_nonneg (Finset.sum_nonneg fun i _ => sq_nonneg (a i - mean a)) (Nat.cast_nonneg _)

/-- `sigma_H ≥ 0`. -/
theorem popStd_nonneg (a : ι → ℝ) : 0 ≤ popStd a :=
  Real.sqrt_nonneg _

theorem mean_const (c : ℝ) (hn : 0 < Fintype.card ι) : mean (fun _ : ι => c) = c := by
  have hn0 : (Fintype.card ι : ℝ) ≠ 0 := by exact_mod_cast hn.ne'
  simp only [mean, Finset.sum_const, Finset.card_univ, nsmul_eq_mul]
  rw [mul_comm, mul_div_assoc, div_self hn0, mul_one]

/-- Identical heads have `sigma_H = 0`. -/
theorem popStd_const (c : ℝ) (hn : 0 < Fintype.card ι) : popStd (fun _ : ι => c) = 0 := by
  unfold popStd popVar
  rw [mean_const c hn]
  simp

/-- `var_pop = var_sample * (n - 1) / n`, the conversion that maps the paper's sample CVs
(Table 3) to the population CV of the participation-ratio identity. -/
theorem popVar_eq_sampleVar_mul (a : ι → ℝ) (hn : 1 < Fintype.card ι) :
    popVar a = sampleVar a * (((Fintype.card ι : ℝ) - 1) / Fintype.card ι) := by
  have h1 : (1 : ℝ) < Fintype.card ι := by exact_mod_cast hn
  have hn1 : (Fintype.card ι : ℝ) - 1 ≠ 0 := (sub_pos.mpr h1).ne'
  unfold popVar sampleVar
  rw [div_mul_div_comm, mul_comm ((Fintype.card ι : ℝ) - 1) (Fintype.card ι : ℝ),
    mul_div_mul_right _ _ hn1]

/-- An average of values in `[lo, hi]` lies in `[lo, hi]`. -/
theorem mean_mem_Icc [Nonempty ι] (f : ι → ℝ) {lo hi : ℝ} (h : ∀ i, f i ∈ Set.Icc lo hi) :
    mean f ∈ Set.Icc lo hi := by
  unfold mean
  have hn : (0 : ℝ) < Fintype.card ι := by exact_mod_cast Fintype.card_pos
  have hm : (∑ i, f i) / Fintype.card ι * Fintype.card ι = ∑ i, f i := by
    rw [div_mul_eq_mul_div, mul_div_assoc, div_self hn.ne', mul_one]
  have hlo : ∑ _i : ι, lo ≤ ∑ i, f i := Finset.sum_le_sum fun i _ => (h i).1
  have hhi : ∑ i, f i ≤ ∑ _i : ι, hi := Finset.sum_le_sum fun i _ => (h i).2
  rw [Finset.sum_const, Finset.card_univ, nsmul_eq_mul] at hlo
  rw [Finset.sum_const, Finset.card_univ, nsmul_eq_mul] at hhi
  refine Set.mem_Icc.mpr ⟨?_, ?_⟩
  · refine le_of_mul_le_mul_right ?_ hn
    rw [hm, mul_comm]
    exact hlo
  · refine le_of_mul_le_mul_right ?_ hn
    rw [hm, mul_comm]
    exact hhi

end GrokDiagnostics
