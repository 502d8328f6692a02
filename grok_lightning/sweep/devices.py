"""Which GPU each local sweep worker sees.

A run asks Lightning for ``devices: 1`` and gets the first GPU its process can see, so without
pinning every worker on a machine with several GPUs trains on GPU 0. The local launcher gives
each worker process a ``CUDA_VISIBLE_DEVICES`` naming one device, spread round robin over the
devices asked for, ``runs_per_device`` workers per device. A worker that dies is replaced on the
device it leaves free, so the spread stays even for the whole sweep.

Device numbers count the GPUs this process can see, as torch numbers them: where the launcher
itself runs under ``CUDA_VISIBLE_DEVICES=4,5,6,7``, device 0 is GPU 4.

    >>> parse_devices("2", visible=None)
    ['0', '1']
    >>> parse_devices("1,3", visible="4,5,6,7")
    ['5', '7']
    >>> layout = []
    >>> for _ in range(4):
    ...     layout.append(pick_device(["0", "1"], layout))
    >>> layout
    ['0', '1', '0', '1']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from grok_lightning.config import ConfigError

__all__ = ["check_devices", "parse_devices", "pick_device", "resolve_devices", "workers_for_devices"]


_FROM_ENVIRONMENT = object()


def parse_devices(spec, visible=_FROM_ENVIRONMENT) -> list[str] | None:
    """The devices a sweep may use, as ``CUDA_VISIBLE_DEVICES`` entries; ``None`` for no pinning.

    ``spec``: ``None`` or ``""`` (no pinning: workers inherit this process's environment), an
    integer ``N`` or its text (the first N devices), or device numbers as a comma list
    (``"0,2,5"``; a single device is ``"3,"``) or a sequence of integers. As in Lightning's
    ``devices``, a bare integer counts and a list names.
    ``visible``: this process's ``CUDA_VISIBLE_DEVICES`` (read from the environment by default).
    """
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return None
    if visible is _FROM_ENVIRONMENT:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        if isinstance(spec, int) or (isinstance(spec, str) and "," not in spec):
            count = int(spec)
            if count < 1:
                raise ValueError
            numbers = list(range(count))
        else:
            parts = spec.split(",") if isinstance(spec, str) else list(spec)
            numbers = [int(p) for p in parts if str(p).strip() != ""]
            if not numbers or min(numbers) < 0 or len(set(numbers)) != len(numbers):
                raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"--devices={spec!r}: expected a count (4) or distinct device numbers (0,1,2,3 or 3,)") from None
    if visible is None:
        return [str(n) for n in numbers]
    masked = [v.strip() for v in visible.split(",") if v.strip()]
    if max(numbers) >= len(masked):
        raise ConfigError(f"--devices={spec!r}: this process sees {len(masked)} GPU(s) "
                          f"(CUDA_VISIBLE_DEVICES={visible})")
    return [masked[n] for n in numbers]


def resolve_devices(devices, runs_per_device: int | None, launcher: str = "local") -> list[str] | None:
    """``--devices`` / ``--runs-per-device`` of a launch, checked: the devices to pin, or None."""
    device_list = parse_devices(devices)
    if runs_per_device is not None and (runs_per_device < 1 or not device_list):
        raise ConfigError(f"--runs-per-device={runs_per_device}: needs --devices and must be >= 1")
    if device_list and launcher != "local":
        raise ConfigError("--devices/--runs-per-device pin local workers; Ray gives each run its GPUs itself "
                          "(--gpus-per-run 0.5 = two runs per GPU)")
    check_devices(device_list)
    return device_list


def workers_for_devices(devices: Sequence[str] | None, runs_per_device: int | None) -> int | None:
    """Local workers when none are asked for: ``runs_per_device`` (default 1) per device; None
    without devices (the launcher's own default then applies)."""
    return None if not devices else len(devices) * (runs_per_device or 1)


def pick_device(devices: Sequence[str], in_use: Iterable[str]) -> str:
    """The device for a new worker: the one with the fewest live workers, the first in ``devices``
    on a tie. Workers started one after another go round robin; a replacement takes the place
    its predecessor left."""
    load = {device: 0 for device in devices}
    for device in in_use:
        if device in load:
            load[device] += 1
    return min(devices, key=lambda device: (load[device], devices.index(device)))


def check_devices(devices: Sequence[str] | None, visible_count: int | None = None) -> None:
    """Refuse devices this machine does not have: a worker pinned to a missing GPU would see no
    CUDA at all, and ``accelerator: auto`` would then train it on the CPU without a word.

    ``visible_count``: GPUs this process sees (default: ``torch.cuda.device_count()``).
    """
    if not devices:
        return
    if visible_count is None:
        import torch

        visible_count = torch.cuda.device_count()
    if visible_count == 0:
        raise ConfigError("--devices: this machine has no CUDA device (torch sees none); drop --devices to run on CPU")
    if os.environ.get("CUDA_VISIBLE_DEVICES") is None:  # entries are then device numbers
        missing = [d for d in devices if not d.isdigit() or int(d) >= visible_count]
        if missing:
            raise ConfigError(f"--devices: device(s) {','.join(missing)} not found; torch sees {visible_count} GPU(s)")
