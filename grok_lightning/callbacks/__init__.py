from grok_lightning.callbacks.diagnostics import AttentionDiagnostics
from grok_lightning.callbacks.evaluation import ScheduledEvaluation, tensorboard_tag
from grok_lightning.callbacks.grok import GrokDetector
from grok_lightning.callbacks.recorder import RunRecorder

__all__ = ["AttentionDiagnostics", "GrokDetector", "RunRecorder", "ScheduledEvaluation", "tensorboard_tag"]
