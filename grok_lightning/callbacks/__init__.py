from grok_lightning.callbacks.diagnostics import AttentionDiagnostics
from grok_lightning.callbacks.evaluation import ScheduledEvaluation, tensorboard_tag
from grok_lightning.callbacks.grok import GrokDetector
from grok_lightning.callbacks.intervention_source import InterventionSource
from grok_lightning.callbacks.interventions import HeadReinit, WeightNormClip
from grok_lightning.callbacks.recorder import RunRecorder
from grok_lightning.callbacks.resume import ResumeCheckpoint

__all__ = ["AttentionDiagnostics", "GrokDetector", "HeadReinit", "InterventionSource", "ResumeCheckpoint", "RunRecorder",
           "ScheduledEvaluation", "WeightNormClip", "tensorboard_tag"]

# long-horizon building blocks
from grok_lightning.callbacks.retention import RetentionMonitor  # noqa: E402
from grok_lightning.callbacks.weight_snapshots import CheckpointSchedule  # noqa: E402

__all__ += ["CheckpointSchedule", "RetentionMonitor"]
