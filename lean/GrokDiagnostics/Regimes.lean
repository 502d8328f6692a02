import Mathlib

/-!
# Regime ordering of the regularised objective (the paper's A1)

Three candidate solutions — memorise `M`, generalise `G`, collapse `C` — have losses
`L_M < L_G < L_C` and complexities `C_M > C_G > C_C`. With `J(λ) = loss + λ · complexity`
(`lam` below: `λ` is a Lean keyword), and thresholds

  `λ_MG = (L_G - L_M)/(C_M - C_G)`,  `λ_GC = (L_C - L_G)/(C_G - C_C)`,

assuming `λ_MG < λ_GC`, the minimiser of `J` is `M` below `λ_MG`, `G` between, and `C`
above `λ_GC`. Only the complexity orderings are needed for the comparisons; the loss
orderings make the thresholds positive (`lamMG_pos`, `lamGC_pos`).

Python: `test_regime_ordering` in `tests/test_metrics_attention.py` checks the same argmin.
-/

namespace GrokDiagnostics

/-- `J = loss + lam * complexity`. -/
noncomputable def J (loss complexity lam : ℝ) : ℝ := loss + lam * complexity

/-- `λ_MG = (L_G - L_M)/(C_M - C_G)`. -/
noncomputable def lamMG (LM LG CM CG : ℝ) : ℝ := (LG - LM) / (CM - CG)

/-- `λ_GC = (L_C - L_G)/(C_G - C_C)`. -/
noncomputable def lamGC (LG LC CG CC : ℝ) : ℝ := (LC - LG) / (CG - CC)

lemma mul_lt_of_lt_div' {x N D : ℝ} (hD : 0 < D) (h : x < N / D) : x * D < N := by
  have h1 : x * D < N / D * D := mul_lt_mul_of_pos_right h hD
  have h2 : N / D * D = N := by
    rw [div_mul_eq_mul_div, mul_div_assoc, div_self hD.ne', mul_one]
  linarith

lemma lt_mul_of_div_lt' {x N D : ℝ} (hD : 0 < D) (h : N / D < x) : N < x * D := by
  have h1 : N / D * D < x * D := mul_lt_mul_of_pos_right h hD
  have h2 : N / D * D = N := by
    rw [div_mul_eq_mul_div, mul_div_assoc, div_self hD.ne', mul_one]
  linarith

variable {LM LG LC CM CG CC lam : ℝ}

theorem lamMG_pos (hL : LM < LG) (hC : CG < CM) : 0 < lamMG LM LG CM CG :=
  div_pos (sub_pos.mpr hL) (sub_pos.mpr hC)

theorem lamGC_pos (hL : LG < LC) (hC : CC < CG) : 0 < lamGC LG LC CG CC :=
  div_pos (sub_pos.mpr hL) (sub_pos.mpr hC)

theorem memorise_beats_generalise (hC : CG < CM) (h : lam < lamMG LM LG CM CG) :
    J LM CM lam < J LG CG lam := by
  unfold lamMG at h
  have h1 := mul_lt_of_lt_div' (sub_pos.mpr hC) h
  rw [mul_sub] at h1
  unfold J
  linarith

theorem generalise_beats_memorise (hC : CG < CM) (h : lamMG LM LG CM CG < lam) :
    J LG CG lam < J LM CM lam := by
  unfold lamMG at h
  have h1 := lt_mul_of_div_lt' (sub_pos.mpr hC) h
  rw [mul_sub] at h1
  unfold J
  linarith

theorem generalise_beats_collapse (hC : CC < CG) (h : lam < lamGC LG LC CG CC) :
    J LG CG lam < J LC CC lam := by
  unfold lamGC at h
  have h1 := mul_lt_of_lt_div' (sub_pos.mpr hC) h
  rw [mul_sub] at h1
  unfold J
  linarith

theorem collapse_beats_generalise (hC : CC < CG) (h : lamGC LG LC CG CC < lam) :
    J LC CC lam < J LG CG lam := by
  unfold lamGC at h
  have h1 := lt_mul_of_div_lt' (sub_pos.mpr hC) h
  rw [mul_sub] at h1
  unfold J
  linarith

/-- Below `λ_MG`, memorisation is the strict minimiser. -/
theorem memorise_below (hMG : CG < CM) (hGC : CC < CG)
    (horder : lamMG LM LG CM CG < lamGC LG LC CG CC) (h : lam < lamMG LM LG CM CG) :
    J LM CM lam < J LG CG lam ∧ J LM CM lam < J LC CC lam := by
  have hMG' := memorise_beats_generalise hMG h
  exact ⟨hMG', hMG'.trans (generalise_beats_collapse hGC (h.trans horder))⟩

/-- Between the thresholds, generalisation is the strict minimiser. -/
theorem generalise_middle (hMG : CG < CM) (hGC : CC < CG)
    (h1 : lamMG LM LG CM CG < lam) (h2 : lam < lamGC LG LC CG CC) :
    J LG CG lam < J LM CM lam ∧ J LG CG lam < J LC CC lam :=
  ⟨generalise_beats_memorise hMG h1, generalise_beats_collapse hGC h2⟩

/-- Above `λ_GC`, collapse is the strict minimiser. -/
theorem collapse_above (hMG : CG < CM) (hGC : CC < CG)
    (horder : lamMG LM LG CM CG < lamGC LG LC CG CC) (h : lamGC LG LC CG CC < lam) :
    J LC CC lam < J LG CG lam ∧ J LC CC lam < J LM CM lam := by
  have hCG := collapse_beats_generalise hGC h
  exact ⟨hCG, hCG.trans (generalise_beats_memorise hMG (horder.trans h))⟩

end GrokDiagnostics
