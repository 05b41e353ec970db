"""Transformer-BiGRU regressor (PyTorch), after the seed paper on GPU compute demand.

The 11 features are a sequence of 11 tokens. Each token is embedded (categorical codes through an
embedding table, numbers through a per-feature linear map), a learned position embedding is
added, and then either
* `order="attention_first"` (paper): 2 self-attention layers -> forward GRU + backward GRU, or
* `order="bigru_first"` (the memory paper): forward + backward GRU -> 2 self-attention layers,
and the last hidden states of both directions go through ReLU, dropout and a linear output of 1.

Presets (frozen configs): `paper` is the seed's Table 2; `bigru_first` swaps the order; `tuned` is
our honest improvement (standardised log target, wider layers, early stopping on a validation
split); `tiny` is for tests. The estimator follows scikit-learn's contract: `fit` returns self,
learned state ends in `_`, `predict` returns a 1-D array.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gpucast.tasks.models.presets import PRESETS, TBGConfig

log = logging.getLogger(__name__)


class TransformerBiGRU(nn.Module):
    """The network: (batch, 11) features -> (batch,) prediction in standardised target units."""

    def __init__(self, cfg: TBGConfig, n_features: int, categorical: tuple[int, ...], cardinalities: tuple[int, ...]):
        super().__init__()
        self.cfg = cfg
        self.categorical = list(categorical)
        self.numeric = [i for i in range(n_features) if i not in categorical]
        self.embeddings = nn.ModuleList(nn.Embedding(k, cfg.d_model) for k in cardinalities)
        self.numeric_weight = nn.Parameter(torch.randn(len(self.numeric), cfg.d_model))  # same scale as an embedding
        self.numeric_bias = nn.Parameter(torch.zeros(len(self.numeric), cfg.d_model))
        self.position = nn.Embedding(cfg.max_positions, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, dim_feedforward=2 * cfg.d_model,
                                           dropout=cfg.dropout, batch_first=True)
        self.attention = nn.TransformerEncoder(layer, cfg.n_attention_layers, enable_nested_tensor=False)
        gru_in = cfg.d_model
        self.gru_fwd = nn.GRU(gru_in, cfg.gru_forward, batch_first=True)
        self.gru_bwd = nn.GRU(gru_in, cfg.gru_backward, batch_first=True)
        both = cfg.gru_forward + cfg.gru_backward
        if cfg.order == "bigru_first":
            self.to_model = nn.Linear(both, cfg.d_model)  # BiGRU outputs back to attention width
            head_in = cfg.d_model
        else:
            head_in = both
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(cfg.dropout), nn.Linear(head_in, 1))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        b, n = x.shape  # (batch, 11)
        tokens = x.new_zeros(b, n, self.cfg.d_model)
        for emb, i in zip(self.embeddings, self.categorical, strict=True):
            tokens[:, i] = emb(x[:, i].long())
        num = x[:, self.numeric].unsqueeze(-1)  # (batch, n_numeric, 1)
        tokens[:, self.numeric] = num * self.numeric_weight + self.numeric_bias
        pos = torch.arange(n, device=x.device)
        return tokens + self.position(pos)  # (batch, 11, d_model)

    def bigru(self, seq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward GRU on seq, backward GRU on the flipped seq: (outputs, last states)."""
        out_f, h_f = self.gru_fwd(seq)  # (batch, 11, gf), (1, batch, gf)
        out_b, h_b = self.gru_bwd(torch.flip(seq, dims=[1]))  # (batch, 11, gb)
        outputs = torch.cat([out_f, torch.flip(out_b, dims=[1])], dim=-1)  # (batch, 11, gf + gb)
        return outputs, torch.cat([h_f[-1], h_b[-1]], dim=-1)  # (batch, gf + gb)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = self.embed(x)
        if self.cfg.order == "bigru_first":
            outputs, _ = self.bigru(seq)
            seq = self.attention(self.to_model(outputs))  # (batch, 11, d_model)
            pooled = seq.mean(dim=1)  # (batch, d_model)
        else:
            seq = self.attention(seq)  # (batch, 11, d_model)
            _, pooled = self.bigru(seq)  # (batch, gf + gb)
        return self.head(pooled).squeeze(-1)  # (batch,)


def pick_device(requested: str | None = None) -> str:
    if requested:
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


class TransformerBiGRURegressor:
    """scikit-learn style estimator around `TransformerBiGRU`."""

    def __init__(self, preset: str = "paper", seed: int = 0, device: str | None = None, epochs: int | None = None,
                 categorical: tuple[int, ...] = (), cardinalities: tuple[int, ...] = (), progress=None,
                 max_seconds: float | None = None):
        self.preset = preset
        self.seed = seed
        self.device = device
        self.epochs = epochs
        self.max_seconds = max_seconds  # time budget: stop after the epoch that crosses it (None: no limit)
        self.categorical = categorical
        self.cardinalities = cardinalities
        self.progress = progress

    def _config(self) -> TBGConfig:
        cfg = PRESETS[self.preset]
        return replace(cfg, epochs=self.epochs) if self.epochs else cfg

    def fit(self, X: np.ndarray, y: np.ndarray) -> TransformerBiGRURegressor:
        cfg = self.config_ = self._config()
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        self.device_ = pick_device(self.device)
        X = np.asarray(X, dtype=np.float32)
        t = np.log(y) if cfg.log_target else np.asarray(y, dtype=np.float64)
        self.num_mean_ = X.mean(axis=0)
        self.num_std_ = X.std(axis=0) + 1e-6
        self.num_mean_[list(self.categorical)], self.num_std_[list(self.categorical)] = 0.0, 1.0
        self.y_mean_, self.y_std_ = float(t.mean()), float(t.std() + 1e-12)
        z = ((t - self.y_mean_) / self.y_std_).astype(np.float32)
        Xs = (X - self.num_mean_) / self.num_std_

        idx = rng.permutation(len(Xs))
        n_val = int(len(Xs) * cfg.validation_fraction) if cfg.early_stopping_patience else 0
        val, train = idx[:n_val], idx[n_val:]
        dev = self.device_
        Xt, zt = torch.from_numpy(Xs[train]).to(dev), torch.from_numpy(z[train]).to(dev)
        Xv, zv = torch.from_numpy(Xs[val]).to(dev), torch.from_numpy(z[val]).to(dev)

        self.model_ = TransformerBiGRU(cfg, X.shape[1], tuple(self.categorical), tuple(self.cardinalities)).to(dev)
        opt = torch.optim.Adam(self.model_.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[cfg.lr_drop_epoch], gamma=0.1)
        loss_fn = nn.MSELoss()
        best, best_state, stale = float("inf"), None, 0
        self.history_, self.stopped_by_ = [], None
        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        started = time.perf_counter()
        for epoch in range(cfg.epochs):
            self.model_.train()
            order = torch.randperm(len(train), generator=gen).to(dev)
            total = 0.0
            for start in range(0, len(train), cfg.batch_size):
                b = order[start:start + cfg.batch_size]
                opt.zero_grad()
                loss = loss_fn(self.model_(Xt[b]), zt[b])
                loss.backward()
                nn.utils.clip_grad_norm_(self.model_.parameters(), cfg.clip_norm)
                opt.step()
                total += loss.item() * len(b)
            sched.step()
            record = {"epoch": epoch + 1, "train_loss": total / max(len(train), 1)}
            if n_val:
                self.model_.eval()
                with torch.no_grad():
                    record["val_loss"] = float(loss_fn(self.model_(Xv), zv))
                if record["val_loss"] < best - 1e-6:
                    best, best_state, stale = record["val_loss"], copy.deepcopy(self.model_.state_dict()), 0
                else:
                    stale += 1
            self.history_.append(record)
            if self.progress and (epoch == 0 or (epoch + 1) % 10 == 0 or epoch + 1 == cfg.epochs):
                self.progress(f"transformer_bigru[{self.preset}] epoch {epoch + 1}/{cfg.epochs} "
                              f"loss {record['train_loss']:.4f}" + (f" val {record['val_loss']:.4f}" if n_val else "")
                              + f" ({time.perf_counter() - started:.0f} s)")
            if n_val and stale >= cfg.early_stopping_patience:
                self.stopped_by_ = f"early stopping at epoch {epoch + 1}"
                break
            elapsed = time.perf_counter() - started
            if self.max_seconds and elapsed >= self.max_seconds and epoch + 1 < cfg.epochs:
                self.stopped_by_ = f"time budget of {self.max_seconds:.0f} s at epoch {epoch + 1} of {cfg.epochs}"
                if self.progress:
                    self.progress(f"transformer_bigru[{self.preset}] stopped: {self.stopped_by_}")
                break
        if best_state is not None:
            self.model_.load_state_dict(best_state)
        self.epochs_run_ = len(self.history_)
        return self

    def predict(self, X: np.ndarray, batch_size: int = 65536) -> np.ndarray:
        Xs = (np.asarray(X, dtype=np.float32) - self.num_mean_) / self.num_std_
        self.model_.eval()
        out = []
        with torch.no_grad():
            for start in range(0, len(Xs), batch_size):
                xb = torch.from_numpy(Xs[start:start + batch_size]).to(self.device_)
                out.append(self.model_(xb).float().cpu().numpy())
        z = np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
        t = z.astype(np.float64) * self.y_std_ + self.y_mean_
        return np.exp(t) if self.config_.log_target else t

    # Checkpoints: state dict + config + scalers, loaded with weights_only=True (no pickled code).
    def save(self, path: Path) -> None:
        torch.save({
            "state_dict": self.model_.state_dict(),
            "config": asdict(self.config_),
            "preset": self.preset,
            "seed": self.seed,
            "categorical": list(self.categorical),
            "cardinalities": list(self.cardinalities),
            "num_mean": torch.from_numpy(self.num_mean_),
            "num_std": torch.from_numpy(self.num_std_),
            "y_mean": self.y_mean_,
            "y_std": self.y_std_,
            "epochs_run": self.epochs_run_,
        }, path)

    @classmethod
    def load(cls, path: Path, device: str | None = None) -> TransformerBiGRURegressor:
        ck = torch.load(path, map_location="cpu", weights_only=True)
        est = cls(preset=ck["preset"], seed=ck["seed"], device=device, categorical=tuple(ck["categorical"]),
                  cardinalities=tuple(ck["cardinalities"]))
        est.config_ = TBGConfig(**ck["config"])
        est.device_ = pick_device(device)
        est.model_ = TransformerBiGRU(est.config_, len(ck["num_mean"]), est.categorical, est.cardinalities)
        est.model_.load_state_dict(ck["state_dict"])
        est.model_.to(est.device_)
        est.num_mean_, est.num_std_ = ck["num_mean"].numpy(), ck["num_std"].numpy()
        est.y_mean_, est.y_std_, est.epochs_run_ = ck["y_mean"], ck["y_std"], ck["epochs_run"]
        return est
