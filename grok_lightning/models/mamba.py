"""Mamba probe for the cross-architecture comparison (docs/decisions.md, "Cross-architecture probes").

Layout (``mamba_ssm``'s ``MixerModel`` with a classification head): operand embedding -> 4
pre-norm residual blocks ``x + mixer(LayerNorm(x))`` -> final LayerNorm at the last position ->
bias-free head d_model -> p. Each ``mixer`` has exactly the parameter names, shapes and
initialisation order of ``mamba_ssm.Mamba`` (d_state 16, d_conv 4, dt_rank = ceil(d_model/16)),
so a state_dict moves between the two backends and, on CPU, the same seed gives the same weights.

Why these norms and sizes (the paper gives only totals: 957,952 at expand 4, 492,032 at 2).
Mixer at d_model 128, expand 4 (d_inner 512, dt_rank 8): in_proj 128*1024 = 131,072; conv1d
512*4 + 512 = 2,560; x_proj 512*(8 + 2*16) = 20,480; dt_proj 8*512 + 512 = 4,608; A_log 512*16 =
8,192; D 512; out_proj 512*128 = 65,536; total 232,960, x4 = 931,840. At expand 2: 116,480, x4 =
465,920. Both totals leave the same 26,112 = 204 * 128 for everything outside the mixers, which
confirms the mixer count. Of it: bias-free head 97 * 128; embedding of the p operand tokens 97 *
128 (the p-row embedding the LSTM's exact count forces, see lstm.py); the remaining 10 * 128 =
five ``nn.LayerNorm`` with weight and bias (one per block + the final one; also mamba_ssm's
``MixerModel`` default, ``rms_norm=False``). Alternatives miss: RMSNorm 957,312; p + 1 embedding
rows 958,080; head with bias 958,049. The sequence is therefore ``[a, b]`` (the constant ``=``
carries no information), read at ``b``; ``equals_token=True`` embeds and reads ``=`` (+128).

Backends. ``torch`` (default): a pure-PyTorch selective scan, sequential over the 2-3 tokens,
runs anywhere. ``mamba_ssm``: ``mamba_ssm.Mamba`` mixers (CUDA kernels; needs CUDA and the
package). ``auto``: ``mamba_ssm`` when both are available, else ``torch``. The chosen one is
``model.backend``. A ``mamba_ssm`` model given CPU inputs runs the reference scan on its weights.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from grok_lightning.config import ConfigError

__all__ = ["BACKENDS", "MambaClassifier", "MambaMixer", "reference_forward", "resolve_backend"]

BACKENDS = ("torch", "auto", "mamba_ssm")
_FALLBACK_ERRORS = (ImportError, RuntimeError, OSError)
_FIELD = "model.arch_kwargs.backend"


class MambaMixer(nn.Module):
    """``mamba_ssm.Mamba``'s parameters and init (biases: conv1d and dt_proj only), in PyTorch."""

    def __init__(
        self,
        d_model: int,
        d_state: int = 16,
        d_conv: int = 4,
        expand: int = 2,
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_scale: float = 1.0,
        dt_init_floor: float = 1e-4,
    ):
        super().__init__()
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16)
        # the same construction (and RNG draw) order as mamba_ssm.Mamba.__init__
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=False)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1, bias=True)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True)
        dt_init_std = self.dt_rank**-0.5 * dt_scale
        nn.init.uniform_(self.dt_proj.weight, -dt_init_std, dt_init_std)
        # dt bias so that softplus(bias) is log-uniform in [dt_min, dt_max]
        log_span = math.log(dt_max) - math.log(dt_min)
        dt = torch.exp(torch.rand(self.d_inner) * log_span + math.log(dt_min)).clamp(min=dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.dt_proj.bias._no_reinit = True
        # S4D-real init: A = -(1, 2, ..., d_state) for every channel
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32).repeat(self.d_inner, 1)))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.D._no_weight_decay = True
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return reference_forward(self, hidden)


def reference_forward(mixer: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """Mamba mixer ``(B, L, d_model) -> (B, L, d_model)`` from its weights (either backend's).

    The recurrence of mamba_ssm's ``selective_scan_ref``, ``h_t = exp(dt_t A) h_{t-1} + dt_t x_t
    B_t``, ``y_t = C_t . h_t + D x_t``, run sequentially (L is 2 or 3 here, a parallel scan would
    not pay). Written for CPU speed, measured: the term ``C_t . (dt_t x_t B_t)`` is a dot product
    (no (B, d_inner, d_state) tensor), the state is only built while a later token needs it, and
    the depthwise causal conv is d_conv shifted products (``conv1d``'s CPU backward alone took
    ~0.1 s per layer per step at paper size). Same weights and maths as the CUDA kernels.
    """
    L = hidden.shape[1]
    x, z = mixer.in_proj(hidden).chunk(2, dim=-1)  # (B, L, d_inner) each
    # causal depthwise conv: token t sees tokens t - j, j < d_conv, through weight[:, 0, K-1-j]
    weight, K = mixer.conv1d.weight[:, 0], mixer.conv1d.weight.shape[-1]
    conv = sum(weight[:, K - 1 - j] * F.pad(x, (0, 0, j, 0))[:, :L] for j in range(min(L, K)))
    x = F.silu(conv + mixer.conv1d.bias)
    dt, B, C = mixer.x_proj(x).split([mixer.dt_rank, mixer.d_state, mixer.d_state], dim=-1)
    dt = F.softplus(F.linear(dt, mixer.dt_proj.weight) + mixer.dt_proj.bias.float())  # (B, L, d_inner)
    A = -torch.exp(mixer.A_log.float())  # (d_inner, d_state)
    dtx = dt * x
    ys, state = [], None  # state: h_{t-1} (B, d_inner, d_state); None while it is zero
    for t in range(L):
        y = dtx[:, t] * (B[:, t] * C[:, t]).sum(-1, keepdim=True)  # C_t . (dt_t x_t B_t)
        if state is not None:
            state = torch.exp(dt[:, t, :, None] * A) * state
            y = y + (state * C[:, t, None, :]).sum(-1)
        if t < L - 1:
            drive = dtx[:, t, :, None] * B[:, t, None, :]
            state = drive if state is None else state + drive
        ys.append(y)
    y = (torch.stack(ys, dim=1) + x * mixer.D.float()) * F.silu(z)
    return mixer.out_proj(y)


def _mamba_ssm_class():
    from mamba_ssm import Mamba  # noqa: PLC0415 (optional dependency, CUDA only)

    return Mamba


def resolve_backend(backend: str) -> str:
    """``torch`` or ``mamba_ssm``; ``auto`` picks ``mamba_ssm`` only with CUDA and the package."""
    if backend not in BACKENDS:
        raise ConfigError(f"{_FIELD}={backend!r}: must be one of {', '.join(BACKENDS)}")
    if backend == "torch":
        return "torch"
    if not torch.cuda.is_available():
        if backend == "mamba_ssm":
            raise ConfigError(f"{_FIELD}='mamba_ssm': needs CUDA, which is not available; use 'torch' or 'auto'")
        return "torch"
    try:
        _mamba_ssm_class()
    except _FALLBACK_ERRORS as err:
        reason = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"
        if backend == "mamba_ssm":
            message = f"{_FIELD}='mamba_ssm': mamba_ssm cannot be imported ({reason}); use 'torch' or 'auto'"
            raise ConfigError(message) from None
        warnings.warn(f"Mamba backend 'auto': mamba_ssm unavailable ({reason}); using the PyTorch scan", stacklevel=3)
        return "torch"
    return "mamba_ssm"


class Block(nn.Module):
    """Pre-norm residual block, ``x + mixer(norm(x))`` (mamba_ssm's ``Block``, unfused)."""

    def __init__(self, d_model: int, mixer: nn.Module):
        super().__init__()
        self.mixer = mixer
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, fast: bool) -> torch.Tensor:
        h = self.norm(x)
        return x + (self.mixer(h) if fast else reference_forward(self.mixer, h))


class MambaClassifier(nn.Module):
    """``tokens (B, 3) [a, b, =]`` -> ``logits (B, n_classes)`` read at the last position.

    Args:
        vocab_size: p + 1 (``=`` is id p; embedded only with ``equals_token``).
        n_classes: p.
        d_model, n_layers, expand, d_state, d_conv: Mamba shape (paper: 128, 4, 4, 16, 4).
        backend: ``torch`` (default), ``auto`` or ``mamba_ssm``; see the module docstring.
        equals_token: also embed and read ``=`` (p + 1 embedding rows).

    >>> model = MambaClassifier(98, 97)
    >>> sum(p.numel() for p in model.parameters()), model.backend
    (957952, 'torch')
    >>> sum(p.numel() for p in MambaClassifier(98, 97, expand=2).parameters())
    492032
    >>> model(torch.zeros(2, 3, dtype=torch.long)).shape
    torch.Size([2, 97])
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_model: int = 128,
        n_layers: int = 4,
        expand: int = 4,
        d_state: int = 16,
        d_conv: int = 4,
        backend: str = "torch",
        equals_token: bool = False,
    ):
        super().__init__()
        self.backend = resolve_backend(backend)
        self.equals_token = equals_token
        shape = dict(d_model=d_model, d_state=d_state, d_conv=d_conv, expand=expand)
        self.embedding = nn.Embedding(vocab_size if equals_token else vocab_size - 1, d_model)
        try:
            self.layers = nn.ModuleList(Block(d_model, self._mixer(shape)) for _ in range(n_layers))
        except (*_FALLBACK_ERRORS, ConfigError) as err:
            if backend != "auto":
                raise
            warnings.warn(f"Mamba backend 'auto': mamba_ssm.Mamba failed ({err}); using the PyTorch scan", stacklevel=2)
            self.backend = "torch"
            self.layers = nn.ModuleList(Block(d_model, self._mixer(shape)) for _ in range(n_layers))
        self.norm_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes, bias=False)

    def _mixer(self, shape: dict) -> nn.Module:
        if self.backend == "torch":
            return MambaMixer(**shape)
        mixer = _mamba_ssm_class()(**shape)
        if mixer.d_inner != shape["expand"] * shape["d_model"]:  # some forks cap d_inner silently
            raise ConfigError(f"mamba_ssm.Mamba built d_inner={mixer.d_inner}, not expand*d_model; use backend 'torch'")
        return mixer

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens if self.equals_token else tokens[:, :2])
        fast = self.backend == "mamba_ssm" and x.is_cuda
        for block in self.layers:
            x = block(x, fast)
        return self.head(self.norm_f(x[:, -1]))
