"""The Transformer-BiGRU's frozen configs: `paper` (the seed's Table 2), `bigru_first`, `tuned`, `tiny`.

Kept apart from the network (`transformer_bigru.py`) so the command line and the training options
can name and check presets without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TBGConfig:
    order: str = "attention_first"  # or "bigru_first"
    d_model: int = 128  # 4 heads x 32 key channels per head
    n_heads: int = 4
    n_attention_layers: int = 2
    max_positions: int = 512
    gru_forward: int = 6
    gru_backward: int = 10
    dropout: float = 0.01
    epochs: int = 200
    batch_size: int = 256
    lr: float = 0.01
    lr_drop_epoch: int = 80  # lr x 0.1 from here on
    weight_decay: float = 1e-3  # L2
    clip_norm: float = 10.0
    early_stopping_patience: int = 0  # 0 = off; else epochs without validation improvement
    validation_fraction: float = 0.0  # taken from the training rows when early stopping
    # Not fixed by Table 2 (so `paper` uses the plainest choice): how numbers become tokens.
    numeric_embedding: str = "linear"  # "linear": x * w + b per feature; "periodic": sin/cos features + linear + ReLU
    frequencies: int = 16  # periodic embedding: frequencies per feature
    frequency_sigma: float = 0.5  # periodic embedding: initial spread of the frequencies (inputs are standardised)


PRESETS: dict[str, TBGConfig] = {
    "paper": TBGConfig(),
    "bigru_first": TBGConfig(order="bigru_first"),
    "tuned": TBGConfig(d_model=64, n_attention_layers=1, gru_forward=32, gru_backward=32, dropout=0.0, batch_size=512, lr=3e-3,
                       lr_drop_epoch=60, weight_decay=1e-5, early_stopping_patience=15, validation_fraction=0.15,
                       numeric_embedding="periodic"),
    "tiny": TBGConfig(d_model=16, n_heads=2, n_attention_layers=1, gru_forward=4, gru_backward=4, epochs=2,
                      batch_size=64),
}

PRESET_NAMES = tuple(PRESETS)
DEFAULT_PRESET = "paper"
