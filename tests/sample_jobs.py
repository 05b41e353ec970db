"""Hand-checkable job records for tests."""

from __future__ import annotations

import json

GOOD = {
    "job_id": "j-1",
    "submitted_at": "2026-11-01T10:00:00Z",
    "updated_at": "2026-11-01T12:00:00Z",
    "status": "COMPLETED",
    "queue": "a100-80g",
    "team": "nlp",
    "model_type": "Transformer",
    "params_million": 110.0,
    "batch_size": 32,
    "input_dim": 512,
    "num_layers": 12,
    "iterations": 10000,
    "precision": "FP16",
    "optimizer": "AdamW",
    "learning_rate": 0.0001,
    "regularization": True,
    "data_augmentation": False,
    "gpu_demand_gflops": 95000.0,
    "peak_gpu_mem_gb": 14.2,
    "runtime_hours": 3.5,
    "failure_reason": None,
}


def record(**overrides) -> dict:
    rec = dict(GOOD)
    for k, v in overrides.items():
        if v is ...:
            rec.pop(k, None)
        else:
            rec[k] = v
    return rec


def jsonl(*records: dict | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


# Strings a log may carry that a renderer would act on (issue 27): TeX for matplotlib, Markdown and a table's
# pipe, a leading underscore (a legend skips it), HTML, control characters XML cannot hold, a terminal escape,
# bidirectional overrides, a template's and a format string's syntax.
HOSTILE_STRINGS = (
    "$x^$", r"$\undefinedmacro{x}$", r"$\alpha$", "a$b$c$", "q|pipe", "_hidden", "**bold**", "`code`",
    "[link](http://example.com)", "<script>alert(1)</script>", "&amp;", "--><!--", "nul\x00byte",
    "esc\x1b[31mred", "line\nbreak", "tab\there", "bell\x07del\x7fc1\x85", "\ufffe\uffff", "\u202eevil",
    "emoji 🚀", "日本語", "back\\slash\\", "{{ x }}", "{x}%s%d", "' OR '1'='1",
)
