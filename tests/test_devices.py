"""GPU pinning of local sweep workers and the launch flags of the reproduce targets, all on CPU."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter

import pytest
from test_sweep import TINY

from grok_lightning.config import ConfigError
from grok_lightning.sweep.devices import check_devices, parse_devices, pick_device, resolve_devices, workers_for_devices


def test_a_count_names_the_first_devices_and_a_list_names_devices():
    assert parse_devices(None, visible=None) is None and parse_devices("", visible=None) is None
    assert parse_devices("4", visible=None) == ["0", "1", "2", "3"]
    assert parse_devices(2, visible=None) == ["0", "1"]
    assert parse_devices("0,2,5", visible=None) == ["0", "2", "5"]
    assert parse_devices("3,", visible=None) == ["3"]  # one device by number, as in Lightning
    assert parse_devices([1, 0], visible=None) == ["1", "0"]


def test_device_numbers_count_the_devices_this_process_sees():
    assert parse_devices("2", visible="4,5,6,7") == ["4", "5"]
    assert parse_devices("1,3", visible="4,5,6,7") == ["5", "7"]
    assert parse_devices("1,", visible="GPU-aaa,GPU-bbb") == ["GPU-bbb"]
    with pytest.raises(ConfigError, match="sees 2 GPU"):
        parse_devices("0,2", visible="4,5")


@pytest.mark.parametrize("spec", ["0", "-1", "a,b", "1,1", "x", ","])
def test_bad_device_specs_are_one_config_error(spec):
    with pytest.raises(ConfigError, match="--devices"):
        parse_devices(spec, visible=None)


def test_workers_go_round_robin_with_runs_per_device():
    devices = ["0", "1", "2"]
    layout: list[str] = []
    for _ in range(workers_for_devices(devices, 2)):
        layout.append(pick_device(devices, layout))
    assert layout == ["0", "1", "2", "0", "1", "2"]
    assert Counter(layout) == {"0": 2, "1": 2, "2": 2}
    assert workers_for_devices(devices, None) == 3 and workers_for_devices(None, None) is None


def test_a_replacement_worker_takes_the_device_its_predecessor_left():
    devices = ["0", "1", "2", "3"]
    live = ["0", "1", "2", "3", "0", "1", "2", "3"]
    live.remove("2")  # the worker on GPU 2 died
    assert pick_device(devices, live) == "2"
    assert pick_device(devices, live + ["2", "9"]) == "0"  # a device outside the list does not count


def test_launch_checks_before_anything_runs(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(ConfigError, match="needs --devices"):
        resolve_devices(None, 2)
    with pytest.raises(ConfigError, match="Ray gives each run its GPUs"):
        resolve_devices("2", None, launcher="ray")
    with pytest.raises(ConfigError, match="no CUDA device"):
        check_devices(["0"], visible_count=0)
    with pytest.raises(ConfigError, match=r"device\(s\) 2 not found; torch sees 2"):
        check_devices(["0", "2"], visible_count=2)
    check_devices(["0", "1"], visible_count=2)
    check_devices(None, visible_count=0)


# A stand-in for `python -m grok_lightning.sweep.worker --serve` speaking the same JSON lines: it
# notes which device it was given, and the first worker to receive a run dies (a CUDA crash).
FAKE_WORKER = r"""
import json, os, sys, time
log, died = sys.argv[1], sys.argv[2]
device = os.environ.get("CUDA_VISIBLE_DEVICES")
with open(log, "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "device": device}) + "\n")
print(json.dumps({"kind": "ready"}), flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if message["kind"] != "run":
        break
    try:
        os.close(os.open(died, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        with open(died, "w") as f:
            f.write(device)
        os._exit(7)
    except FileExistsError:
        pass
    time.sleep(1.0)
    name = message["task"]["name"]
    print(json.dumps({"kind": "done", "summary": {"name": name, "status": "completed", "device": device}}), flush=True)
"""


def test_local_workers_are_pinned_and_a_dead_worker_is_replaced_on_its_device(tmp_path, monkeypatch):
    from grok_lightning.sweep import launchers, local_pool

    log, died = tmp_path / "workers.jsonl", tmp_path / "died"
    command = [sys.executable, "-c", FAKE_WORKER, str(log), str(died)]
    monkeypatch.setattr(local_pool, "worker_command", lambda parent, threads: command)
    monkeypatch.setattr("grok_lightning.sweep.devices.check_devices", lambda devices, visible_count=None: None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    result = launchers.run_sweep(TINY, out=tmp_path / "out", devices="0,2", runs_per_device=2,
                                 stream=open(os.devnull, "w"))
    assert result.statuses == {"failed": 1, "completed": 5}, result.statuses
    # workers log in the order they start, not the order they were spawned: count per device
    spawned = Counter(json.loads(line)["device"] for line in log.read_text().splitlines())
    lost = died.read_text()
    assert lost in ("4", "6")  # device numbers count the GPUs this process sees (0 -> 4, 2 -> 6)
    assert spawned == {lost: 3, ({"4", "6"} - {lost}).pop(): 2}, "2 per device, the replacement where one died"


@pytest.mark.parametrize("flags, message", [
    (["--runs-per-device", "2"], "needs --devices"),
    (["--devices", "2", "--launcher", "ray"], "Ray gives each run its GPUs"),
    (["--gpus-per-run", "1"], "apply to --launcher ray only"),
    (["--devices", "x"], "expected a count"),
])
def test_sweep_run_refuses_bad_device_flags_in_one_line(tmp_path, capsys, monkeypatch, flags, message):
    from grok_lightning.sweep.cli import main

    monkeypatch.setattr("grok_lightning.sweep.launchers.import_ray", lambda: None)  # Ray need not be installed
    assert main(["run", str(TINY), "--out", str(tmp_path / "out")] + flags) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists(), "nothing ran"
