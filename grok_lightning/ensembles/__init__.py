"""E compatible runs trained as one vectorised ensemble, each writing its own run.

``module`` (the batched step), ``members`` (what each member's callbacks see) and ``runner``
(building and running an ensemble from run configurations); imports go runner -> module, members.
"""

from grok_lightning.ensembles.members import MemberCallbacks, MemberTrainer
from grok_lightning.ensembles.module import EnsembleModule
from grok_lightning.ensembles.runner import build_ensemble, build_member, compatibility_key, run_ensemble

__all__ = ["EnsembleModule", "MemberCallbacks", "MemberTrainer", "build_ensemble", "build_member",
           "compatibility_key", "run_ensemble"]
