from grok_lightning.callbacks.evaluation import ScheduledEvaluation, tensorboard_tag
from grok_lightning.callbacks.grok import GrokDetector
from grok_lightning.callbacks.recorder import RunRecorder

__all__ = ["GrokDetector", "RunRecorder", "ScheduledEvaluation", "tensorboard_tag"]
