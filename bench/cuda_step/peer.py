"""What the CUDA benchmark's PyTorch peers share (torch_gpt2.py,
torch_llama.py): the command line, and the timed training loop under
torch.compile with bf16 autocast, fused AdamW (nanoGPT's hyperparameters)
and global-norm clipping at 1.0, on random tokens, printing one JSON
object: tokens/s (median over the timed steps), step times and the loss."""
import argparse
import json
import statistics
import time

import torch


def arguments(batch, seq, steps, warmup):
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--seq", type=int, default=seq)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=warmup)
    return p.parse_args()


def run(model, vocab, a, lr, extra=None):
    """Trains `model` (on the GPU) for a.warmup + a.steps steps, prints the record."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    step = torch.compile(model)
    idx = torch.randint(0, vocab, (a.batch, a.seq), device="cuda")
    targets = torch.randint(0, vocab, (a.batch, a.seq), device="cuda")
    times, loss, compile_seconds = [], None, 0.0
    compile_start = time.time()
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
        elif i == a.warmup - 1:
            compile_seconds = time.time() - compile_start
    median = statistics.median(times)
    record = {"framework": f"torch {torch.__version__} torch.compile bf16 autocast",
              "batch": a.batch, "seq": a.seq, "steps_timed": len(times),
              "step_seconds_median": median, "tokens_per_s": a.batch * a.seq / median,
              "params": sum(q.numel() for q in model.parameters()),
              "peak_memory_bytes": torch.cuda.max_memory_allocated(),
              "warmup_seconds": compile_seconds, "final_loss": float(loss)}
    record.update(extra or {})
    print(json.dumps(record))
