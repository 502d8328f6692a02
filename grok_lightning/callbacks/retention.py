"""RetentionMonitor: the retention rule (anti-grokking, :mod:`grok_lightning.stats.retention`)
applied to every evaluation of a run, its result in the run's record.

The rule itself has no Lightning in it; this callback only feeds it the evaluation metrics,
publishes its summary to ``pl_module.record_extras`` after every evaluation (so the record is
right while the run trains, not only at its end) and checkpoints its state. It never stops
training.
"""

from __future__ import annotations

from lightning.pytorch import Callback, LightningModule, Trainer

from grok_lightning.stats.retention import RETENTION_TAGS, RetentionRule

__all__ = ["RETENTION_TAGS", "RetentionMonitor"]


class RetentionMonitor(Callback):
    """Detect anti-grokking on the evaluation stream (:class:`~grok_lightning.stats.retention.RetentionRule`).

    Args:
        grok_threshold, drop_below, train_min, persistence: the rule's criteria (0.99, 0.9, 0.99, 3).
        test_metric, train_metric: evaluation columns read.

    >>> monitor = RetentionMonitor()
    >>> for epoch, test in [(100, 1.0), (110, 0.3), (120, 1.0), (130, 0.5), (140, 0.4), (150, 0.45)]:
    ...     monitor.observe(epoch, test, train_acc=1.0)   # 110 is a one-evaluation spike
    >>> monitor.tag, monitor.anti_grok_epoch
    ('anti-grokked', 130)
    """

    def __init__(self, grok_threshold: float = 0.99, drop_below: float = 0.9, train_min: float = 0.99,
                 persistence: int = 3, test_metric: str = "test_acc", train_metric: str = "train_acc") -> None:
        self.rule = RetentionRule(grok_threshold, drop_below, train_min, persistence)
        self.test_metric, self.train_metric = test_metric, train_metric

    @property
    def state_key(self) -> str:
        rule = self.rule
        return self._generate_state_key(grok_threshold=rule.grok_threshold, drop_below=rule.drop_below,
                                        train_min=rule.train_min, persistence=rule.persistence)

    # the rule's outcome, read through the callback
    @property
    def tag(self) -> str:
        return self.rule.tag

    @property
    def grok_epoch(self) -> int | None:
        return self.rule.grok_epoch

    @property
    def anti_grok_epoch(self) -> int | None:
        return self.rule.anti_grok_epoch

    @property
    def episodes(self) -> list[dict]:
        return self.rule.episodes

    def observe(self, epoch: int, test_acc: float | None, train_acc: float | None) -> None:
        self.rule.observe(epoch, test_acc, train_acc)

    def summary(self) -> dict:
        return self.rule.summary()

    def _publish(self, pl_module: LightningModule) -> None:
        extras = getattr(pl_module, "record_extras", None)
        if extras is not None:
            extras.update(self.rule.summary())

    # --- hooks ------------------------------------------------------------------------------
    def on_evaluation_end(self, trainer: Trainer, pl_module: LightningModule, epoch: int, metrics: dict) -> None:
        self.rule.observe(epoch, metrics.get(self.test_metric), metrics.get(self.train_metric))
        self._publish(pl_module)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._publish(pl_module)

    def state_dict(self) -> dict:
        return self.rule.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.rule.load_state_dict(state_dict)
