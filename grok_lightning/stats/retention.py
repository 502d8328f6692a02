"""The retention rule: late loss of generalisation with training accuracy intact (anti-grokking).

The paper (arXiv 2605.20441, section 5 and E8) calls a run *retained* when it still generalises at
the horizon (20,000 epochs) and reports anti-grokking, test accuracy collapsing late while the
training set stays fitted, in about a third of canonical-weight-decay seeds. It gives no numeric
rule, so this module fixes one (docs/long_horizon.md):

* the run must first grok: test accuracy >= ``grok_threshold`` (0.99, the paper's criterion);
* after that, an evaluation with test accuracy < ``drop_below`` (0.9) points to
  ``"anti-grokked"`` when train accuracy is still >= ``train_min`` (0.99), and to
  ``"collapsed"`` when train accuracy fell too (a slingshot spike looks like this, so does a
  late total collapse; neither is anti-grokking); test accuracy in [drop_below, grok_threshold)
  points nowhere;
* a state changes only after ``persistence`` (3) consecutive evaluations pointing to it, because
  slingshot spikes are real in this setup and recover at the next evaluation (docs/decisions.md,
  "Epochs, evaluation and the record"); the episode is dated by the window's *first* epoch, and
  ``anti_grok_epoch`` is that of the first anti-grokked episode;
* a confirmed drop is undone only by ``persistence`` consecutive evaluations back at
  ``grok_threshold`` (the run re-grokked); every episode stays in ``retention_episodes``.

The tag is the end state, as E8 counts retention ("still generalising at 20 K"):
``"never grokked"``, ``"anti-grokked"``, ``"collapsed"`` (both unrecovered at the last evaluation)
or ``"retained"``. A drop shorter than ``persistence`` at the very end is not confirmed;
``retention_final_test_acc`` shows it.

:class:`RetentionRule` is the rule on a stream of evaluations (no Lightning: statistics and
figures apply it to a record's history, :func:`retention_of`); the callback
:class:`~grok_lightning.callbacks.retention.RetentionMonitor` feeds it during training and
never stops training.
"""

from __future__ import annotations

from grok_lightning.config import require
from grok_lightning.records import rows

__all__ = ["RETENTION_TAGS", "RetentionRule", "retention_of"]

RETENTION_TAGS = ("retained", "anti-grokked", "never grokked", "collapsed")


class RetentionRule:
    """The retention state machine on a stream of evaluations (see the module docstring).

    Args:
        grok_threshold: test accuracy that counts as grokked, and as recovered (paper: 0.99).
        drop_below: test accuracy below which a post-grok evaluation is a drop (0.9).
        train_min: a drop needs train accuracy at least this (0.99): "training accuracy intact".
        persistence: consecutive evaluations needed to confirm a drop or a recovery (3).

    >>> rule = RetentionRule()
    >>> for epoch, test in [(100, 1.0), (110, 0.3), (120, 1.0), (130, 0.5), (140, 0.4), (150, 0.45)]:
    ...     rule.observe(epoch, test, train_acc=1.0)   # 110 is a one-evaluation spike
    >>> rule.tag, rule.anti_grok_epoch
    ('anti-grokked', 130)
    """

    def __init__(self, grok_threshold: float = 0.99, drop_below: float = 0.9, train_min: float = 0.99,
                 persistence: int = 3) -> None:
        require(0 < grok_threshold <= 1, "retention.grok_threshold", grok_threshold, "must be in (0, 1]")
        require(0 < drop_below <= grok_threshold, "retention.drop_below", drop_below,
                f"must be in (0, grok_threshold={grok_threshold}]")
        require(0 <= train_min <= 1, "retention.train_min", train_min, "must be in [0, 1]")
        require(isinstance(persistence, int) and persistence >= 1, "retention.persistence", persistence,
                "must be an integer >= 1")
        self.grok_threshold, self.drop_below, self.train_min = grok_threshold, drop_below, train_min
        self.persistence = persistence
        self.grok_epoch: int | None = None
        self.anti_grok_epoch: int | None = None
        self.state = "retained"  # after grokking: "retained", "anti-grokked" or "collapsed"
        self.episodes: list[dict] = []  # {"kind", "epoch", "recovered_epoch"}
        self._pending: str | None = None  # the state the current window of evaluations points to
        self._run_start: int | None = None  # its first epoch
        self._run_length = 0
        self.final_test_acc: float | None = None
        self.final_train_acc: float | None = None

    @property
    def tag(self) -> str:
        return "never grokked" if self.grok_epoch is None else self.state

    def _target(self, test_acc: float, train_acc: float) -> str | None:
        """The state this evaluation pushes towards, or None (it breaks any pending window)."""
        if self.state != "retained":
            return "retained" if test_acc >= self.grok_threshold else None
        if test_acc >= self.drop_below:
            return None
        return "anti-grokked" if train_acc >= self.train_min else "collapsed"

    def observe(self, epoch: int, test_acc: float | None, train_acc: float | None) -> None:
        """Feed one evaluation; evaluations without the two accuracies are ignored."""
        if test_acc is None or train_acc is None:
            return
        self.final_test_acc, self.final_train_acc = float(test_acc), float(train_acc)
        if self.grok_epoch is None:
            if test_acc >= self.grok_threshold:
                self.grok_epoch = epoch
            return
        target = self._target(test_acc, train_acc)
        if target is None or target != self._pending:
            self._pending, self._run_start, self._run_length = target, epoch, 0
        if target is None:
            return
        self._run_length += 1
        if self._run_length < self.persistence:
            return
        if target == "retained":  # re-grokked: close the open episode
            self.episodes[-1]["recovered_epoch"] = self._run_start
        else:
            self.episodes.append({"kind": target, "epoch": self._run_start, "recovered_epoch": None})
            if target == "anti-grokked" and self.anti_grok_epoch is None:
                self.anti_grok_epoch = self._run_start
        self.state = target
        self._pending, self._run_start, self._run_length = None, None, 0

    def summary(self) -> dict:
        """The record entries of this rule (``retention``, ``anti_grok_epoch``, ...)."""
        return {
            "retention": self.tag,
            "anti_grok_epoch": self.anti_grok_epoch,
            "retention_episodes": [dict(e) for e in self.episodes],
            "retention_final_test_acc": self.final_test_acc,
            "retention_final_train_acc": self.final_train_acc,
            "retention_criteria": {"grok_threshold": self.grok_threshold, "drop_below": self.drop_below,
                                   "train_min": self.train_min, "persistence": self.persistence},
        }

    def state_dict(self) -> dict:
        return {"grok_epoch": self.grok_epoch, "anti_grok_epoch": self.anti_grok_epoch, "state": self.state,
                "episodes": [dict(e) for e in self.episodes], "pending": self._pending,
                "run_start": self._run_start, "run_length": self._run_length,
                "final_test_acc": self.final_test_acc, "final_train_acc": self.final_train_acc}

    def load_state_dict(self, state_dict: dict) -> None:
        self.grok_epoch = state_dict.get("grok_epoch")
        self.anti_grok_epoch = state_dict.get("anti_grok_epoch")
        self.state = state_dict.get("state", "retained")
        self.episodes = [dict(e) for e in state_dict.get("episodes", [])]
        self._pending = state_dict.get("pending")
        self._run_start = state_dict.get("run_start")
        self._run_length = int(state_dict.get("run_length", 0))
        self.final_test_acc = state_dict.get("final_test_acc")
        self.final_train_acc = state_dict.get("final_train_acc")


def retention_of(record: dict, rule: RetentionRule | None = None) -> RetentionRule:
    """The rule run over a record's whole history (test and train accuracy at every evaluation)."""
    rule = rule or RetentionRule()
    for epoch, test, train in rows(record, "test_acc", "train_acc"):
        rule.observe(epoch, test, train)
    return rule
