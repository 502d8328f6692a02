# grok_lightning: `make test` and `make reproduce-all` are the two commands a new user needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch where this machine has one on disk; override e.g. `make install TORCH=torch`.
TORCH ?= torch==2.13.0
PROFILE ?= smoke
OUT ?= reproduction
PYTEST_ARGS ?=
# extras installed with the package: `predict` (scikit-learn, small) for reproduce-predict. The heavy ones
# come in only where they are used: `llc` (devinterp + transformers, ~50 s, +411 MB) with
# `make reproduce-rllc` (without it, reproduce-all reads the rLLC measurements stored beside the runs;
# where there are none its rLLC rows say "not run: devinterp is not installed"),
# `ray` for the Ray launcher; CI installs both to run their tests
EXTRAS ?= dev,predict
# How the reproduce targets launch their sweeps (empty = the default; docs/gpu.md):
#   ENSEMBLE=64        train up to 64 compatible runs as one vectorised ensemble per task (GPUs; on CPU: single runs)
#   WORKERS=N          local worker processes (default: one per core, or DEVICES x RUNS_PER_DEVICE)
#   DEVICES=8 | 0,2,5  pin local workers to these GPUs, round robin; RUNS_PER_DEVICE=2 workers per GPU
#   LAUNCHER=ray ADDRESS=head:6379 GPUS_PER_RUN=0.5   a Ray cluster instead of local workers
ENSEMBLE ?=
WORKERS ?=
DEVICES ?=
RUNS_PER_DEVICE ?=
LAUNCHER ?=
ADDRESS ?=
GPUS_PER_RUN ?=
LAUNCH = $(if $(ENSEMBLE),--ensemble-size $(ENSEMBLE)) $(if $(WORKERS),--workers $(WORKERS)) \
	$(if $(DEVICES),--devices $(DEVICES)) $(if $(RUNS_PER_DEVICE),--runs-per-device $(RUNS_PER_DEVICE)) \
	$(if $(LAUNCHER),--launcher $(LAUNCHER)) $(if $(ADDRESS),--address $(ADDRESS)) \
	$(if $(GPUS_PER_RUN),--gpus-per-run $(GPUS_PER_RUN))
# `make tensorboard`: the address TensorBoard listens on (localhost: this machine only; TB_HOST=0.0.0.0: every
# interface, e.g. a remote machine reached without an SSH tunnel) and its port
TB_HOST ?= localhost
TB_PORT ?= 6006
# `make gpu-check`: the device it checks (cuda, or cpu for the tiny CI version) and its JSON
DEVICE ?= cuda
GPU_CHECK_OUT ?= gpu_check.json

.DEFAULT_GOAL := help
.PHONY: help install demo test test-fast gpu-check gpu-pilots gpu-systems reproduce-all report plan tensorboard lean benchmarks clean

help: ## list targets
	@grep -E '^[a-zA-Z0-9_%-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE OUT EXTRAS TORCH TB_HOST TB_PORT; for sweeps ENSEMBLE WORKERS DEVICES RUNS_PER_DEVICE LAUNCHER ADDRESS GPUS_PER_RUN (docs/gpu.md)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(VENV)/.installed ## create .venv and install the package with its extras (EXTRAS, default dev,predict)

demo: install ## a first run: the smoke-sized model groks in about a minute on 2 cores; prints where to look
	$(VENV)/bin/grok-lightning demo

test: install ## full test suite, including the slow real-training tests (what CI runs)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: install ## unit tests only (no real training)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# the reproduction targets: each one module of reproduce/targets/, listed in reproduce/targets/registry.py
# (`python -m reproduce list`); a new figure is a module and a registry entry, then `python -m reproduce makefile --write`
# >>> reproduce targets: written by `python -m reproduce makefile --write` from the registry; do not edit
.PHONY: reproduce-canonical reproduce-fig5 reproduce-fig1 reproduce-predict reproduce-fig11 reproduce-fig9 reproduce-fig2 reproduce-fig8 reproduce-fig4 reproduce-fig10 reproduce-fig3 reproduce-fig6 reproduce-fig7 reproduce-lockin reproduce-lockin-fig1 reproduce-lockin-fig2 reproduce-lockin-fig3 reproduce-lockin-fig4 reproduce-head_clusters reproduce-rllc
reproduce-canonical: install ## the canonical run (p=97, 4Lx8H, lambda=1) until it groks; every profile runs the same run (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce canonical --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig5: install ## Fig. 5 lambda_c (logistic, bootstrap, GLM) and nu (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig5 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig1: install ## Fig. 1 regime map lambda x model size, on Fig. 5's sweep and more (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig1 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-predict: install ## "does it predict?": held-out AUC of baselines vs attention diagnostics, on the runs of Fig. 5 and 1 (medium: 5, 4 and 8) (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce predict --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig11: install ## Fig. 11 / Table 4 AdamW relaxation kappa and horizon bound (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig11 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig9: install ## Fig. 9 multi-task grok counts, per-task lambda_c (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig9 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig2: install ## Fig. 2 two-phase dynamics (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig2 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig8: install ## Fig. 8 E12 interventions: control, head re-init, norm clip, paired tests (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig8 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig4: install ## Fig. 4 peak sigma_H vs d/H and the random-label null (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig4 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig10: install ## Fig. 10 lambda_c per architecture: MLP, LSTM, Mamba (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig10 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig3: install ## Fig. 3 five-stage long-horizon trajectory (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig3 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig6: install ## Fig. 6 PR_norm over checkpoints + Table 3 C1 identity (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig6 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-fig7: install ## Fig. 7 ESD alpha over checkpoints (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce fig7 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-lockin: install ## spectral lock-in (arXiv 2605.08119): main, window, x^2 vs ReLU, eta sweep (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce lockin --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-lockin-fig1: install ## lock-in Fig. 1: sigma2/sigma3, grok vs control, and the sign rule (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce lockin-fig1 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-lockin-fig2: install ## lock-in Fig. 2: the detector's window W = 5/10/20/30 (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce lockin-fig2 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-lockin-fig3: install ## lock-in Fig. 3: x^2 vs ReLU (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce lockin-fig3 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-lockin-fig4: install ## lock-in Fig. 4: the eta sweep (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce lockin-fig4 --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-head_clusters: install ## head-role clusters (section 5): single linkage of the heads' output vectors at cosine distance 0.5, per checkpoint (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce head_clusters --profile $(PROFILE) --out $(OUT) $(LAUNCH)

reproduce-rllc: install ## rLLC vs sigma_H over the long-horizon checkpoints (devinterp SGLD, the `llc` extra) (PROFILE=smoke|medium|paper)
	$(PY) -m pip install -q -e ".[llc]"
	$(PY) -m reproduce rllc --profile $(PROFILE) --out $(OUT) $(LAUNCH)

# <<< reproduce targets

reproduce-all: install ## every reproduced figure + reproduction/REPORT.md (PROFILE=smoke|medium|paper)
	$(PY) -m reproduce all --profile $(PROFILE) --out $(OUT) $(LAUNCH)

# the medium records ship in results/medium; `make report PROFILE=medium` reads them there
REPORT_OUT = $(if $(filter medium,$(PROFILE)),results/medium,$(OUT))
# with PROFILE=medium it also rewrites every generated block of README.md and docs/ (reproduce/report/prose.py)
report: install ## REPORT.md, figures and fits from the records already in results/medium (PROFILE=medium) or OUT, as its MANIFEST.json lists them, and (medium) the generated blocks of README.md and docs/; trains nothing
	$(PY) -m reproduce all --profile $(PROFILE) --out $(REPORT_OUT) --no-train --require-manifest
	$(if $(filter medium,$(PROFILE)),$(PY) -m reproduce.report.prose)

# the planner reads the claims table, the report rows and the records already in results/ (no installed verb:
# the installed package has neither); docs/medium.md "Which runs next" explains the table
plan: install ## rank the runs that would decide undecided claims by expected claims decided per CPU-hour (PROFILE=medium; trains nothing)
	$(PY) -m reproduce.plan --profile $(PROFILE)

tensorboard: install ## TensorBoard on runs/ and reproduction/ at localhost:6006 (TB_HOST=0.0.0.0: every interface)
	@echo "open http://$(TB_HOST):$(TB_PORT)/#custom_scalars&_smoothingWeight=0  (accuracy, s_bar, sigma_H; smoothing 0)"
	$(VENV)/bin/tensorboard --logdir_spec runs:runs,reproduction:$(OUT) --host $(TB_HOST) --port $(TB_PORT)

lean: ## build the Lean 4 proofs when `lake` is installed (not part of CI)
	@if command -v lake >/dev/null 2>&1; then cd lean && lake exe cache get && lake build; \
	else echo "lean: skipped: 'lake' not found (install elan from GitHub; this repository's CI does not build Lean)"; fi

benchmarks: install ## performance benchmarks (minutes; numbers go into docs/performance.md)
	$(PY) benchmarks/lightning_overhead.py
	$(PY) benchmarks/diagnostics_overhead.py
	$(PY) benchmarks/arch_step_time.py

gpu-pilots: install ## one GPU window of open pilots as ensembles (Fig. 2 arms, E12 control), records into results/pilots (DEVICE=cpu: tiny)
	$(PY) benchmarks/gpu_pilots.py --device $(DEVICE) $(if $(filter cpu,$(DEVICE)),--tiny --root reproduction/gpu_pilots,--deadline 540)

gpu-systems: install ## the paper's GPU-sized systems (Fig. 10 MLP, LSTM; Fig. 9 small) as ensembles in one window, records into results/paper (DEVICE=cpu: tiny)
	$(PY) benchmarks/gpu_systems.py --device $(DEVICE) $(if $(filter cpu,$(DEVICE)),--tiny --root reproduction/gpu_systems --out reproduction/gpu_systems/gpu_systems.json,--deadline 540)

gpu-check: install ## device check -> one JSON (DEVICE=cuda: <= 10 min on one GPU; DEVICE=cpu: tiny, minutes)
	$(PY) benchmarks/gpu_check.py --device $(DEVICE) $(if $(filter cpu,$(DEVICE)),--tiny,--deadline 540) --out $(GPU_CHECK_OUT)

clean: ## remove runs, reproduction outputs and the venv
	rm -rf runs reproduction $(VENV) .pytest_cache .hypothesis

init-calibration: install ## the initialisation calibration table and figure, from the shipped pilot records (no training)
	$(PY) -m reproduce.pilots.init_calibration --part report --out $(OUT)
