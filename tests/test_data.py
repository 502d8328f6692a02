import pytest
import torch

from grok_lightning.config import ConfigError
from grok_lightning.data import ModularArithmeticDataModule, modular_table


@pytest.mark.parametrize("operation", ["add", "sub", "mul", "div"])
def test_labels_correct_for_every_operation(operation):
    p = 13
    pairs, labels = modular_table(p, operation)
    for (a, b), c in zip(pairs.tolist(), labels.tolist()):
        if operation == "add":
            assert c == (a + b) % p
        elif operation == "sub":
            assert c == (a - b) % p
        elif operation == "mul":
            assert c == (a * b) % p
        else:
            assert b != 0 and (c * b) % p == a


def test_sizes_and_division_excludes_zero():
    assert len(modular_table(97, "add")[1]) == 97 * 97
    pairs, _ = modular_table(97, "div")
    assert len(pairs) == 97 * 96 and bool((pairs[:, 1] != 0).all())


def _setup(**kw):
    dm = ModularArithmeticDataModule(**kw)
    dm.setup()
    return dm


def test_split_sizes_disjoint_and_tokens():
    dm = _setup(p=97, train_fraction=0.5, split_seed=3)
    assert len(dm.y_train) == 4704 and len(dm.y_test) == 9409 - 4704
    train = {tuple(t) for t in dm.x_train.tolist()}
    test = {tuple(t) for t in dm.x_test.tolist()}
    assert not train & test and len(train | test) == 9409
    assert bool((dm.x_train[:, 2] == 97).all()), "third token is '=' (id p)"
    assert dm.vocab_size == 98 and dm.n_classes == 97


def test_split_seed_controls_split_and_defaults_to_run_seed(monkeypatch):
    a, b = _setup(p=23, split_seed=1), _setup(p=23, split_seed=2)
    assert not torch.equal(a.x_train, b.x_train)
    monkeypatch.setenv("PL_GLOBAL_SEED", "1")
    assert torch.equal(_setup(p=23).x_train, a.x_train)


def test_random_labels_permute_train_only():
    true, null = _setup(p=23, split_seed=0), _setup(p=23, split_seed=0, random_labels=True, label_seed=5)
    assert torch.equal(true.x_train, null.x_train) and torch.equal(true.y_test, null.y_test)
    assert not torch.equal(true.y_train, null.y_train)
    assert sorted(true.y_train.tolist()) == sorted(null.y_train.tolist())


def test_loader_batches_and_epoch_seeded_shuffle():
    dm = _setup(p=23, batch_size=100, split_seed=0)
    loader = dm.train_dataloader()
    batches = list(loader)
    assert [len(y) for _, y in batches] == [100, 100, 64]
    first = torch.cat([x for x, _ in batches])
    loader.sampler.set_epoch(1)
    second = torch.cat([x for x, _ in loader])
    loader.sampler.set_epoch(0)
    again = torch.cat([x for x, _ in loader])
    assert not torch.equal(first, second) and torch.equal(first, again)
    full = _setup(p=23, full_batch=True, split_seed=0).train_dataloader()
    assert len(list(full)) == 1


def test_order_seed_reorders_batches_of_the_same_split():
    """The placebo's perturbation: same split, same examples per epoch, another order."""
    base, other = _setup(p=23, batch_size=100, split_seed=0), _setup(p=23, batch_size=100, split_seed=0, order_seed=9)
    same = _setup(p=23, batch_size=100, split_seed=0, order_seed=0)
    assert torch.equal(base.x_train, other.x_train)
    first, second = (torch.cat([x for x, _ in dm.train_dataloader()]) for dm in (base, other))
    assert not torch.equal(first, second)
    assert sorted(map(tuple, first.tolist())) == sorted(map(tuple, second.tolist()))
    assert torch.equal(first, torch.cat([x for x, _ in same.train_dataloader()]))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(p=1), "data.p"),
        (dict(p=10, operation="div"), "data.p"),
        (dict(train_fraction=0.0), "data.train_fraction"),
        (dict(train_fraction=1.0), "data.train_fraction"),
        (dict(operation="pow"), "data.operation"),
    ],
)
def test_bad_data_config_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        ModularArithmeticDataModule(**kwargs)


def test_the_operator_token_layout_is_a_op_b_equals():
    """``[a, op, b, =]`` (T = 4, op = p + 1): the same pairs and labels as ``[a, b, =]``."""
    plain, with_op = _setup(p=13), _setup(p=13, operator_token=True)
    assert (plain.vocab_size, plain.seq_len, with_op.vocab_size, with_op.seq_len) == (14, 3, 15, 4)
    assert torch.equal(with_op.x_train[:, [0, 2, 3]], plain.x_train) and torch.equal(with_op.y_train, plain.y_train)
    assert bool((with_op.x_train[:, 1] == 14).all())
    with pytest.raises(ConfigError, match="data.operator_token"):
        ModularArithmeticDataModule(p=13, operator_token="yes")
