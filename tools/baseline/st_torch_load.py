# SPDX-License-Identifier: MIT
"""Baseline for haccel-bench stream --device cuda: safetensors'
load_file(device="cuda") on the same file, cold (page cache dropped, as
root) and warm.

    python3 st_torch_load.py FILE [--json]
"""
import json
import os
import sys
import time

import torch
from safetensors.torch import load_file


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def load(path):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    d = load_file(path, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    n = sum(x.numel() * x.element_size() for x in d.values())
    del d
    torch.cuda.empty_cache()
    return n, t


def main():
    path = sys.argv[1]
    out = {"file": path, "bytes": os.path.getsize(path)}
    out["cold_dropped"] = drop_caches()
    n, t = load(path)
    out["cold_bytes_per_s"] = n / t
    load(path)
    n, t = load(path)
    out["warm_bytes_per_s"] = n / t
    print(json.dumps(out) if "--json" in sys.argv else out)


if __name__ == "__main__":
    main()
