"""Head-role clusters (arXiv 2605.20441 section 5): the kernel against scipy on explicit vectors, the
Metric's chunk invariance, the degenerate cases, and the target's analysis of saved weights."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import pdist, squareform

from grok_lightning.metrics import (
    HeadClusterCount,
    head_cluster_count,
    head_cluster_labels,
    head_cosine_distance,
    head_output_gram,
    head_output_gram_update,
    head_output_grams,
)
from grok_lightning.metrics.head_outputs import head_outputs, projection_input_hooks
from grok_lightning.models.transformer import DecoderTransformer


def _vectors(seed: int, n: int = 12, dim: int = 40, groups: int = 4, noise: float = 0.6) -> np.ndarray:
    """``n`` vectors around ``groups`` random directions: clusters at several scales."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((groups, dim))
    return centres[rng.integers(0, groups, n)] + noise * rng.standard_normal((n, dim))


def _as_outputs(vectors: np.ndarray) -> torch.Tensor:
    """Explicit head vectors as head outputs ``(L=1, B=1, H=N, T=1, D)``: the Gram is their dot products."""
    return torch.as_tensor(vectors, dtype=torch.float64)[None, None, :, None, :]


def _brute_force(vectors: np.ndarray, threshold: float) -> np.ndarray:
    return fcluster(linkage(pdist(vectors, "cosine"), method="single"), t=threshold, criterion="distance")


def _same_partition(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return all(len(set(b[a == label])) == 1 for label in set(a)) and len(set(a)) == len(set(b))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5, 0.8])
def test_the_kernel_is_scipy_single_linkage_of_the_cosine_distances(seed, threshold):
    vectors = _vectors(seed)
    gram = head_output_gram_update(_as_outputs(vectors), "all")
    assert torch.allclose(gram, torch.as_tensor(vectors @ vectors.T), rtol=1e-12)
    distance = head_cosine_distance(gram).numpy()
    assert np.allclose(squareform(distance, checks=False), pdist(vectors, "cosine"), atol=1e-12)
    labels = head_cluster_labels(gram, threshold)
    assert _same_partition(labels, _brute_force(vectors, threshold))
    # single linkage cut at t: the connected components of the graph "distance <= t"
    components = connected_components(distance <= threshold, directed=False)[1]
    assert _same_partition(labels, components)
    assert head_cluster_count(gram, threshold) == len(set(components))


def test_heads_of_all_layers_are_pooled_in_layer_order():
    torch.manual_seed(0)
    outputs = [torch.randn(5, 3, 2, 4), torch.randn(5, 3, 2, 4)]  # 2 layers x 3 heads
    gram = head_output_gram_update(outputs, "all")
    flat = torch.cat(outputs, dim=1).to(torch.float64).transpose(0, 1).reshape(6, -1)
    assert torch.allclose(gram, flat @ flat.T, rtol=1e-12)
    assert torch.allclose(head_output_gram_update(torch.stack(outputs)), head_output_gram_update(outputs))
    answer = torch.cat(outputs, dim=1)[:, :, -1].to(torch.float64).transpose(0, 1).reshape(6, -1)
    assert torch.allclose(head_output_gram_update(outputs), answer @ answer.T, rtol=1e-12)


@pytest.mark.parametrize("positions", ["answer", "all"])
def test_two_updates_are_one(positions):
    torch.manual_seed(1)
    outputs = torch.randn(2, 30, 4, 3, 8, dtype=torch.float64)
    outputs[1, :, 0] = -3 * outputs[0, :, 2] + 0.1 * torch.randn(30, 3, 8, dtype=torch.float64)
    one, two = HeadClusterCount(positions=positions), HeadClusterCount(positions=positions, num_heads=8)
    one.update(outputs)
    two.update(outputs[:, :11])
    two.update(outputs[:, 11:])
    assert torch.allclose(one.gram, two.gram, rtol=1e-12) and int(one.compute()) == int(two.compute())
    assert int(one.compute()) == head_cluster_count(head_output_gram_update(outputs, positions))
    with pytest.raises(ValueError, match="heads changed between updates"):
        two.update(outputs[:1])


def test_degenerate_cases():
    vectors = np.array([[1.0, 0.0], [0.0, 0.0], [2.0, 0.1], [0.0, 0.0], [0.0, 1.0]])
    gram = head_output_gram_update(_as_outputs(vectors), "all")
    distance = head_cosine_distance(gram)
    assert torch.isnan(distance[1]).all() and torch.isnan(distance[:, 3]).all()
    labels = head_cluster_labels(gram)
    assert labels[0] == labels[2] and len({labels[1], labels[3], labels[0], labels[4]}) == 4  # silent heads alone
    assert head_cluster_count(gram) == 4
    assert head_cluster_count(torch.zeros(3, 3, dtype=torch.float64)) == 3  # every head silent
    assert head_cluster_count(torch.ones(1, 1)) == 1 and head_cluster_count(torch.zeros(1, 1)) == 1
    assert head_cluster_count(torch.zeros(0, 0)) == 0
    with pytest.warns(UserWarning, match="before the ``update``"):  # torchmetrics says so; no heads seen: 0
        assert int(HeadClusterCount().compute()) == 0
    # a chain: each step under the cut joins, whatever the distance of its ends (single linkage)
    angles = np.radians([0, 50, 100, 150])
    chain = np.stack([np.cos(angles), np.sin(angles)], 1)
    assert head_cluster_count(head_output_gram_update(_as_outputs(chain), "all"), 0.5) == 1
    assert head_cluster_count(head_output_gram_update(_as_outputs(chain), "all"), 0.3) == 4


@pytest.mark.parametrize("bad, message", [
    (dict(threshold=-0.1), "threshold=-0.1"), (dict(threshold=float("nan")), "threshold=nan"),
    (dict(positions="first"), "positions='first'"),
])
def test_bad_parameters_are_one_line(bad, message):
    with pytest.raises(ValueError, match=message):
        HeadClusterCount(**bad)


def test_bad_inputs_are_one_line():
    with pytest.raises(ValueError, match=r"square \(N, N\)"):
        head_cluster_count(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\(B, H, T, D\)"):
        head_output_gram_update([torch.zeros(2, 3, 4)])


def test_the_model_gram_matches_the_hooked_outputs_in_one_chunk():
    torch.manual_seed(2)
    model = DecoderTransformer(24, 23, d_model=16, n_layers=2, n_heads=4, d_ff=32).train()
    tokens = torch.randint(0, 23, (50, 3))
    captured: list = []
    handles = projection_input_hooks(model.eval(), captured)
    with torch.no_grad():
        model(tokens)
    for handle in handles:
        handle.remove()
    model.train()
    for positions in ("answer", "all"):
        whole = head_output_gram_update(head_outputs(captured), positions)
        chunked = head_output_gram(model, tokens, positions, batch_size=7)
        assert chunked.shape == (8, 8) and torch.allclose(whole, chunked, rtol=1e-10, atol=1e-12)
    assert model.training  # the model's mode is restored
    # mean vectors: one per head, its answer-position output averaged over the examples
    means = torch.cat([o[:, :, -1].to(torch.float64).mean(0) for o in head_outputs(captured)])   # (8, D)
    chunked = head_output_gram(model, tokens, batch_size=7, vectors="mean")
    assert head_cluster_count(chunked) == head_cluster_count(means @ means.T)
    cosine = lambda g: g / torch.outer(g.diagonal().sqrt(), g.diagonal().sqrt())   # noqa: E731
    assert torch.allclose(cosine(chunked), cosine(means @ means.T), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="vectors='median'"):
        head_output_gram(model, tokens, vectors="median")
    # one pass for several readings gives each reading's own Gram
    readings = [("answer", "examples"), ("all", "examples"), ("answer", "mean")]
    together = head_output_grams(model, tokens, readings, batch_size=7)
    assert list(together) == readings
    for positions, vectors in readings:
        alone = head_output_gram(model, tokens, positions, batch_size=11, vectors=vectors)
        assert torch.allclose(together[(positions, vectors)], alone, rtol=1e-10, atol=1e-12)


# --- the target: a synthetic record and its saved weights -------------------------------------------
def _record(seed: int, horizon: int = 200) -> dict:
    config = {"wd": 1.0, "seed": seed, "max_epochs": horizon,
              "model": {"arch": "transformer", "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 32,
                        "arch_kwargs": None, "init": "pytorch", "lr": 0.001, "betas": [0.9, 0.999]},
              "data": {"p": 23, "operation": "add", "train_fraction": 0.5, "split_seed": None,
                       "random_labels": False, "label_seed": 0, "batch_size": 512}}
    return {"run_id": f"{seed:04d}abcd{seed:04d}", "name": f"wd1.0_seed{seed}_{seed:04d}abcd", "status": "completed",
            "config": config, "grok_epoch": 120, "final_test_acc": 1.0, "final_epoch": horizon,
            "history": {"epoch": [0, 80, 160, horizon]}}


def _save_weights(runs_root, record: dict, epochs=(0, 80, 160)) -> None:
    """A run folder of a sweep store with a tiny model's weights in CheckpointSchedule's format."""
    from reproduce.targets.weight_analysis import build_model_from_record

    weights = runs_root / record["name"] / "weights"
    weights.mkdir(parents=True)
    for i, epoch in enumerate(epochs):
        torch.manual_seed(1000 * record["config"]["seed"] + i)
        model = build_model_from_record(record)
        if epoch == 160:  # head 1 of layer 1 a copy of head 0 (its q, k, v rows and W_O columns): one role fewer
            attn, d = model.blocks[1].attn, model.blocks[1].attn.d_head
            with torch.no_grad():
                for start in (0, attn.n_heads * d, 2 * attn.n_heads * d):  # the q, k and v blocks of the fused qkv
                    attn.qkv.weight[start + d:start + 2 * d] = attn.qkv.weight[start:start + d]
                    attn.qkv.bias[start + d:start + 2 * d] = attn.qkv.bias[start:start + d]
                attn.out.weight[:, d:2 * d] = attn.out.weight[:, :d]
        torch.save({"epoch": epoch, "state_dict": model.state_dict(), "metrics": {"test_acc": 0.5}},
                   weights / f"epoch_{epoch:05d}.pt")


def test_the_target_counts_every_checkpoint_and_scores_the_paper_s_epoch(tmp_path):
    from reproduce.report import verdict
    from reproduce.targets import head_clusters
    from reproduce.targets.weight_analysis import build_model_from_record, eval_split

    runs_root = tmp_path / "sweep" / "runs"
    records = [_record(seed) for seed in (7, 42, 11)]
    for record in records:
        _save_weights(runs_root, record)
    summary = head_clusters.analyse(records, runs_root, "medium", tmp_path / "out")
    lead = summary["runs"]["42"]
    assert [c["epoch"] for c in lead["checkpoints"]] == [0, 80, 160]
    record = records[1]
    model = build_model_from_record(record)
    model.load_state_dict(torch.load(runs_root / record["name"] / "weights" / "epoch_00080.pt",
                                     weights_only=True)["state_dict"])
    expected = head_cluster_count(head_output_gram(model, eval_split(record, "test")[0]))
    assert lead["checkpoints"][1]["clusters"] == expected  # the test split, answer position, threshold 0.5
    assert lead["checkpoints"][2]["clusters"] <= 3  # the duplicated heads share a cluster
    rows = json.loads((tmp_path / "out" / "rows.json").read_text())
    main = next(r for r in rows if r["claim"] == "heads.clusters" and not r["sensitivity"])
    at_160 = {seed: summary["runs"][str(seed)]["at_paper_epoch"] for seed in (42, 7, 11)}
    assert main["ours"] == at_160[42] and main["n"] == 1 and sorted(main["runs"]) == sorted(at_160.values())
    assert main["runs"][0] == at_160[42]  # seed 42 first
    assert not verdict(main).startswith(("not run here", "inconclusive"))  # three seeds decide it
    assert (tmp_path / "out" / "head_clusters.png").stat().st_size > 10_000
    for record in records:  # a clone ships records and the stored counts, not the weights
        shutil.rmtree(runs_root / record["name"] / "weights")
        assert (runs_root / record["name"] / "checkpoint_points.json").is_file()
    again = head_clusters.analyse(records, runs_root, "medium", tmp_path / "again")
    assert again["runs"] == summary["runs"] and again["rows"] == summary["rows"]


def test_the_target_row_waits_for_three_seeds_and_the_paper_s_epoch(tmp_path):
    from reproduce.report import verdict
    from reproduce.targets import head_clusters

    runs_root = tmp_path / "runs"
    two = [_record(42), _record(7)]
    for record in two:
        _save_weights(runs_root, record)
    main = next(r for r in json.loads(json.dumps(head_clusters.analyse(two, runs_root, "medium", tmp_path / "a")["rows"]))
                if not r["sensitivity"])
    assert verdict(main).startswith("inconclusive")  # one run's value needs 3 runs of ours
    short = [_record(seed, horizon=60) for seed in (42, 7, 11)]
    for record in short:
        _save_weights(tmp_path / "short", record, epochs=(0, 30, 60))
    main = head_clusters.analyse(short, tmp_path / "short", "smoke", tmp_path / "b")["rows"][0]
    assert main["ours"] is None and verdict(main).startswith("not run here (horizon)")
