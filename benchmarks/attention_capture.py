"""Cost of the attention capture of the PyTorch hook (docs/rules.md, `logit_growth`).

    .venv/bin/python benchmarks/attention_capture.py

1. At a statistics step: one forward inside `AttentionCapture` (every torch call through the
   torch function mode, each attention call's logits computed and handed over) against the
   plain forward, for an MLP (its first captured forward: it meets no attention) and tiny
   Hugging Face GPT-2s with sdpa and eager attention. Interleaved, the fastest of 100 in
   thread CPU time (the machine may be shared), one thread.
2. Off statistics steps: a forward of an MLP recorded with the hook, with the capture and
   with it left out (`Hook._watch_attention` a no-op): blocks of 2000 forwards, interleaved,
   the fastest block of 8.
"""

from __future__ import annotations

import tempfile
import time

import torch
import transformers
from torch import nn

import mldbg.torch
from mldbg.frameworks import torch as adapter
from mldbg.frameworks.torch_attention import AttentionCapture


def _gpt2(n_embd: int, layers: int, seq: int, impl: str = "sdpa") -> tuple[nn.Module, torch.Tensor]:
    cfg = transformers.GPT2Config(n_layer=layers, n_head=4, n_embd=n_embd, vocab_size=100, n_positions=seq,
                                  bos_token_id=0, eos_token_id=0, attn_implementation=impl)  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg).eval(), torch.randint(0, 100, (8, seq))


def _mlp() -> tuple[nn.Module, torch.Tensor]:
    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return net.eval(), torch.randn(32, 64)


def captured_forward() -> None:
    cases = [("mlp (its first captured forward)", _mlp()), ("gpt2 2x64, length 64, sdpa", _gpt2(64, 2, 64)),
             ("gpt2 4x128, length 128, sdpa", _gpt2(128, 4, 128)),
             ("gpt2 4x128, length 128, eager", _gpt2(128, 4, 128, "eager"))]  # fmt: skip
    for name, (model, x) in cases:
        got: list[str] = []
        capture = AttentionCapture(lambda n, t, out=got: out.append(n))
        key = object()
        capture.watch(model, "", key)
        plain, captured = [], []
        with torch.no_grad():
            for _ in range(3):
                model(x)
            for _ in range(100):
                t = time.thread_time()
                model(x)
                plain.append(time.thread_time() - t)
                capture._quiet.clear()  # noqa: SLF001 - measure the first captured forward each time
                got.clear()
                t = time.thread_time()
                capture.start(key, "TRAIN")
                model(x)
                capture.stop(key)
                captured.append(time.thread_time() - t)
        a, b = min(plain) * 1e3, min(captured) * 1e3
        print(f"{name:34s} plain {a:7.3f} ms  captured {b:7.3f} ms  (+{b - a:.3f} ms, {(b / a - 1) * 100:+.1f}%), "
              f"{len(got)} records")  # fmt: skip


def off_statistics_steps() -> None:
    watch = adapter.Hook._watch_attention
    models, hooks, times = {}, [], {False: [], True: []}
    x = torch.randn(32, 64)
    with tempfile.TemporaryDirectory() as tmp:
        for capture in (False, True):
            adapter.Hook._watch_attention = watch if capture else (lambda self, m, inner: None)  # type: ignore[method-assign]
            torch.manual_seed(0)
            models[capture] = _mlp()[0]
            hook = mldbg.torch.Hook(f"{tmp}/{capture}", statistics_warmup=0, statistics_every=100)
            hook.register_module(models[capture])
            hooks.append(hook)
        adapter.Hook._watch_attention = watch  # type: ignore[method-assign]
        with torch.no_grad():
            for _ in range(8):
                for capture in (False, True):
                    t = time.thread_time()
                    for _ in range(2000):
                        models[capture](x)
                    times[capture].append((time.thread_time() - t) / 2000 * 1e6)
        for hook in hooks:
            hook.close()
    print(f"MLP forward, statistics every 100th step: without the capture {min(times[False]):.1f} us, "
          f"with it {min(times[True]):.1f} us")  # fmt: skip


if __name__ == "__main__":
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    captured_forward()
    off_statistics_steps()
