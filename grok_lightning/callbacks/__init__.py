from grok_lightning.callbacks.diagnostics import AttentionDiagnostics
from grok_lightning.callbacks.evaluation import ScheduledEvaluation, tensorboard_tag
from grok_lightning.callbacks.grok import GrokDetector
from grok_lightning.callbacks.interventions import HeadReinit, WeightNormClip
from grok_lightning.callbacks.recorder import RunRecorder

__all__ = ["AttentionDiagnostics", "GrokDetector", "HeadReinit", "RunRecorder", "ScheduledEvaluation", "WeightNormClip",
           "tensorboard_tag"]
