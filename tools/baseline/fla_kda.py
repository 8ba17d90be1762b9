# SPDX-License-Identifier: MIT
"""Baselines for haccel-bench kernels: fla's chunk_kda (prefill) and
fused_recurrent_kda (decode) on the shapes haccel-bench times.

    PYTHONPATH=/path/to/flash-linear-attention python3 fla_kda.py [--json] [--decode]
        [--heads H[,H...]]

fla (https://github.com/fla-org/flash-linear-attention) is not part of
haccel; point PYTHONPATH at a checkout. Inputs are bf16 as fla expects,
states fp32 [N, H, 128, 128]; times are CUDA events around back-to-back
calls after warm-up calls (the first of which compiles and autotunes fla's
Triton kernels, a minute or more), like haccel-bench. --decode adds
fused_recurrent_kda at batch 1, 64 and 256. --heads picks the head counts
(default 32,64), in that order: each new shape autotunes again.
"""
import json
import sys

import torch
from fla.ops.kda import chunk_kda, fused_recurrent_kda


def bench(fn, warm, iters):
    for _ in range(warm):
        fn()
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / 1e3 / iters


def inputs(n, t, h, dev):
    q = torch.nn.functional.normalize(torch.randn(n, t, h, 128, device=dev), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(n, t, h, 128, device=dev), dim=-1).bfloat16()
    v = torch.randn(n, t, h, 128, device=dev).bfloat16()
    g = -torch.rand(n, t, h, 128, device=dev) * 0.05 - 0.001
    beta = torch.rand(n, t, h, device=dev).bfloat16() * 0.8 + 0.1
    s0 = torch.zeros(n, h, 128, 128, device=dev)
    return q, k, v, g, beta, s0


def heads():
    for i, a in enumerate(sys.argv):
        if a == "--heads" and i + 1 < len(sys.argv):
            return tuple(int(x) for x in sys.argv[i + 1].split(","))
    return (32, 64)


def main():
    dev = "cuda"
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    torch.manual_seed(0)
    with torch.no_grad():
        for h in heads():
            q, k, v, g, beta, s0 = inputs(1, 8192, h, dev)
            t = bench(lambda: chunk_kda(q, k, v, g, beta, scale=128 ** -0.5,
                                        initial_state=s0, output_final_state=True),
                      3, 10)
            out["rows"].append({"kernel": "fla chunk_kda", "T": 8192, "H": h,
                                "seconds": t, "tokens_per_s": 8192 / t})
            print(out["rows"][-1], file=sys.stderr, flush=True)
        for h in heads() if "--decode" in sys.argv else ():
            for b in (1, 64, 256):
                q, k, v, g, beta, s0 = inputs(b, 1, h, dev)
                t = bench(lambda: fused_recurrent_kda(q, k, v, g, beta, scale=128 ** -0.5,
                                                      initial_state=s0,
                                                      output_final_state=True),
                          5, 50)
                by = 2.0 * b * h * 128 * 128 * 4
                out["rows"].append({"kernel": "fla fused_recurrent_kda", "batch": b, "H": h,
                                    "seconds": t, "state_bytes_per_s": by / t})
    if "--json" in sys.argv:
        print(json.dumps(out, indent=1))
    else:
        for r in out["rows"]:
            print(r)


if __name__ == "__main__":
    main()
