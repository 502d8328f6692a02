import Lake
open Lake DSL

/-! Machine-checked well-formedness facts about the attention diagnostics of
arXiv 2605.20441 (see README.md). Mathlib is pinned to the release tag matching
`lean-toolchain`. -/

package «grokDiagnostics» where
  leanOptions := #[⟨`autoImplicit, false⟩, ⟨`relaxedAutoImplicit, false⟩]

require mathlib from git
  "https://github.com/leanprover-community/mathlib4.git" @ "v4.15.0"

@[default_target]
lean_lib «GrokDiagnostics» where
