import Mathlib
import GrokDiagnostics.Std

/-!
# The participation-ratio identity (the paper's module C1)

For eigenvalues `a : ι → ℝ` with `n = card ι > 0` and `∑ a > 0`,

  `R = (∑ a)^2 / ∑ a^2 = n / (1 + CV^2)`,  `CV^2 = popVar a / mean a ^ 2`,

with the **population** variance. Hence `R / n = 1 / (1 + CV^2)` (the paper's Lean
`PRnorm`), the affine `(R - 1)/(n - 1)` used in the paper's text and Table 3, and the same
with a sample CV converted by `var_pop = var_sample (n - 1)/n`. We also prove `R ≤ n`, and
`1 ≤ R` for non-negative eigenvalues (bounds the paper attributes to C1 but did not prove).

Python: `participation_ratio`, `participation_ratio_from_cv`,
`check_participation_identity` in `grok_lightning/metrics/functional.py`.
-/

namespace GrokDiagnostics

variable {ι : Type*} [Fintype ι]

/-- `R = (∑ a)^2 / ∑ a^2`. -/
noncomputable def participationRatio (a : ι → ℝ) : ℝ := (∑ i, a i) ^ 2 / ∑ i, a i ^ 2

/-- Squared coefficient of variation with the population variance. -/
noncomputable def cvSq (a : ι → ℝ) : ℝ := popVar a / mean a ^ 2

/-- Squared coefficient of variation with the sample variance (torch `unbiased=True`). -/
noncomputable def sampleCvSq (a : ι → ℝ) : ℝ := sampleVar a / mean a ^ 2

/-- The paper's text normalisation `(R - 1)/(n - 1)`. -/
noncomputable def prNormAffine (a : ι → ℝ) : ℝ :=
  (participationRatio a - 1) / ((Fintype.card ι : ℝ) - 1)

/-- `∑ a^2 = ∑ (a - μ)^2 + 2 μ ∑ a - n μ^2` for any `μ`. -/
theorem sum_sq_eq_sum_sub_sq_add (a : ι → ℝ) (μ : ℝ) :
    ∑ i, a i ^ 2 = ∑ i, (a i - μ) ^ 2 + 2 * μ * ∑ i, a i - (Fintype.card ι : ℝ) * μ ^ 2 := by
  have h : ∀ i, (a i - μ) ^ 2 = a i ^ 2 - 2 * μ * a i + μ ^ 2 := fun i => by ring
  simp only [h, Finset.sum_add_distrib, Finset.sum_sub_distrib, ← Finset.mul_sum,
    Finset.sum_const, Finset.card_univ, nsmul_eq_mul]
  ring

/-- With `μ = mean a`: `∑ a^2 = ∑ (a - μ)^2 + n μ^2` (the paper's auxiliary lemma). -/
theorem sum_sq_eq_sum_sub_mean_sq_add_n_mul_mean_sq (a : ι → ℝ) (hn : 0 < Fintype.card ι) :
    ∑ i, a i ^ 2 = ∑ i, (a i - mean a) ^ 2 + (Fintype.card ι : ℝ) * mean a ^ 2 := by
  have hn0 : (Fintype.card ι : ℝ) ≠ 0 := by exact_mod_cast hn.ne'
  have hS : ∑ i, a i = (Fintype.card ι : ℝ) * mean a := by
    unfold mean
    rw [mul_comm, div_mul_eq_mul_div, mul_div_assoc, div_self hn0, mul_one]
  rw [sum_sq_eq_sum_sub_sq_add a (mean a), hS]
  ring

/-- The algebra behind the identity, on plain reals (`S = ∑ a`, `V = ∑ (a - μ)^2`). -/
lemma pr_algebra {n S V : ℝ} (hn : 0 < n) (hS : 0 < S) :
    S ^ 2 / (V + 2 * (S / n) * S - n * (S / n) ^ 2) = n / (1 + V / n / (S / n) ^ 2) := by
  have hn0 : n ≠ 0 := hn.ne'
  have hS0 : S ≠ 0 := hS.ne'
  have hden : V + 2 * (S / n) * S - n * (S / n) ^ 2 = (n * V + S ^ 2) / n := by
    field_simp
    ring
  have hcv : 1 + V / n / (S / n) ^ 2 = (n * V + S ^ 2) / S ^ 2 := by
    field_simp
    ring
  rw [hden, hcv, div_div_eq_mul_div, div_div_eq_mul_div]
  ring

/-- **C1**: `R = n / (1 + CV^2)` with the population CV. -/
theorem participationRatio_eq (a : ι → ℝ) (hn : 0 < Fintype.card ι) (hS : 0 < ∑ i, a i) :
    participationRatio a = Fintype.card ι / (1 + cvSq a) := by
  have hn' : (0 : ℝ) < Fintype.card ι := by exact_mod_cast hn
  have hQ := sum_sq_eq_sum_sub_sq_add a (mean a)
  unfold participationRatio cvSq popVar
  rw [hQ]
  exact pr_algebra hn' hS

/-- **C1**, the paper's Lean form: `PRnorm = R / n = 1 / (1 + CV^2)`. -/
theorem prNorm_ratio_eq (a : ι → ℝ) (hn : 0 < Fintype.card ι) (hS : 0 < ∑ i, a i) :
    participationRatio a / Fintype.card ι = 1 / (1 + cvSq a) := by
  have hn0 : (Fintype.card ι : ℝ) ≠ 0 := by exact_mod_cast hn.ne'
  rw [participationRatio_eq a hn hS, div_right_comm, div_self hn0]

/-- **C1**, the paper's text form: `(R - 1)/(n - 1) = (n/(1 + CV^2) - 1)/(n - 1)`. -/
theorem prNormAffine_eq (a : ι → ℝ) (hn : 0 < Fintype.card ι) (hS : 0 < ∑ i, a i) :
    prNormAffine a = ((Fintype.card ι : ℝ) / (1 + cvSq a) - 1) / ((Fintype.card ι : ℝ) - 1) := by
  unfold prNormAffine
  rw [participationRatio_eq a hn hS]

/-- `CV_pop^2 = CV_sample^2 (n - 1)/n`. -/
theorem cvSq_eq_sampleCvSq_mul (a : ι → ℝ) (hn : 1 < Fintype.card ι) :
    cvSq a = sampleCvSq a * (((Fintype.card ι : ℝ) - 1) / Fintype.card ι) := by
  unfold cvSq sampleCvSq
  rw [popVar_eq_sampleVar_mul a hn]
  ring

/-- Table 3 of the paper: PR_norm from the published *sample* CV. -/
theorem prNormAffine_eq_of_sampleCv (a : ι → ℝ) (hn : 1 < Fintype.card ι) (hS : 0 < ∑ i, a i) :
    prNormAffine a = ((Fintype.card ι : ℝ) /
      (1 + sampleCvSq a * (((Fintype.card ι : ℝ) - 1) / Fintype.card ι)) - 1) /
        ((Fintype.card ι : ℝ) - 1) := by
  rw [prNormAffine_eq a (lt_trans Nat.zero_lt_one hn) hS, cvSq_eq_sampleCvSq_mul a hn]

theorem cvSq_nonneg (a : ι → ℝ) : 0 ≤ cvSq a :=
  div_nonneg (popVar_nonneg a) (sq_nonneg _)

/-- `R ≤ n`. -/
theorem participationRatio_le_card (a : ι → ℝ) (hn : 0 < Fintype.card ι) (hS : 0 < ∑ i, a i) :
    participationRatio a ≤ Fintype.card ι := by
  rw [participationRatio_eq a hn hS]
  exact div_le_self (Nat.cast_nonneg _) (le_add_of_nonneg_right (cvSq_nonneg a))

theorem sum_sq_le_sq_sum (a : ι → ℝ) (h0 : ∀ i, 0 ≤ a i) : ∑ i, a i ^ 2 ≤ (∑ i, a i) ^ 2 := by
  calc ∑ i, a i ^ 2 ≤ ∑ i, a i * ∑ j, a j := by
        apply Finset.sum_le_sum
        intro i _
        rw [sq]
        exact mul_le_mul_of_nonneg_left
          (Finset.single_le_sum (f := a) (fun j _ => h0 j) (Finset.mem_univ i)) (h0 i)
    _ = (∑ i, a i) ^ 2 := by rw [← Finset.sum_mul, sq]

theorem sum_sq_pos_of_sum_pos (a : ι → ℝ) (hS : 0 < ∑ i, a i) : 0 < ∑ i, a i ^ 2 := by
  have hnn : 0 ≤ ∑ i, a i ^ 2 := Finset.sum_nonneg fun i _ => sq_nonneg (a i)
  rcases hnn.lt_or_eq with h | h
  · exact h
  · have hz := (Finset.sum_eq_zero_iff_of_nonneg fun i _ => sq_nonneg (a i)).mp h.symm
    have hzero : ∑ i, a i = 0 := Finset.sum_eq_zero fun i hi => by
      have h2 := hz i hi
      rw [sq] at h2
      exact mul_self_eq_zero.mp h2
    linarith

/-- `1 ≤ R` for non-negative eigenvalues, so `(R - 1)/(n - 1) ∈ [0, 1]` and `R/n ∈ [1/n, 1]`. -/
theorem one_le_participationRatio (a : ι → ℝ) (h0 : ∀ i, 0 ≤ a i) (hS : 0 < ∑ i, a i) :
    1 ≤ participationRatio a := by
  have hQ := sum_sq_pos_of_sum_pos a hS
  have h1 := mul_le_mul_of_nonneg_right (sum_sq_le_sq_sum a h0) (inv_nonneg.mpr hQ.le)
  rw [mul_inv_cancel₀ hQ.ne', ← div_eq_mul_inv] at h1
  exact h1

end GrokDiagnostics
