"""Configuration validation: every bad input fails before training with one clear line.

Each check raises :class:`ConfigError` whose message names the field, the bad value and the
allowed values, e.g. ``data.train_fraction=1.5: must be in the open interval (0, 1)``. The CLI
prints that one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

from typing import Any, Iterable

OPERATIONS = ("add", "sub", "mul", "div")


class ConfigError(ValueError):
    """A configuration value is invalid. ``str(err)`` is the one line shown to the user."""


def is_prime(n: int) -> bool:
    """Trial division; p is at most a few thousand here.

    >>> [n for n in range(20) if is_prime(n)]
    [2, 3, 5, 7, 11, 13, 17, 19]
    """
    if n < 2:
        return False
    f = 2
    while f * f <= n:
        if n % f == 0:
            return False
        f += 1
    return True


def require(condition: bool, field: str, value: Any, allowed: str) -> None:
    """Raise ``ConfigError("field=value: allowed")`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"{field}={value!r}: {allowed}")


def require_choice(field: str, value: Any, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    require(value in choices, field, value, f"must be one of {', '.join(choices)}")


def validate_modular_task(p: int, operation: str, train_fraction: float, prefix: str = "data") -> None:
    require_choice(f"{prefix}.operation", operation, OPERATIONS)
    require(isinstance(p, int) and p >= 2, f"{prefix}.p", p, "must be an integer >= 2")
    if operation == "div":
        require(is_prime(p), f"{prefix}.p", p, "must be prime for operation 'div' (modular inverse)")
    require(
        isinstance(train_fraction, (int, float)) and 0.0 < float(train_fraction) < 1.0,
        f"{prefix}.train_fraction",
        train_fraction,
        "must be in the open interval (0, 1)",
    )


def validate_optimizer(lr: float, weight_decay: float, prefix: str = "model") -> None:
    require(lr > 0, f"{prefix}.lr", lr, "must be > 0")
    require(weight_decay >= 0, f"{prefix}.weight_decay", weight_decay, "must be >= 0")


def validate_positive_ints(prefix: str = "model", **values: int) -> None:
    for name, value in values.items():
        require(
            isinstance(value, int) and value >= 1, f"{prefix}.{name}", value, "must be an integer >= 1"
        )
