"""Run in a subprocess with a chosen BLAS environment: prints JSON with the kernel OpenBLAS picked,
float64 GEMM speed, and NumPy naive / tiled attention time at T=512 (B=1, h=8, d=64)."""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np


def _median_time(fn, repeats: int = 5) -> float:
    fn()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    from attnlab import ref

    try:
        import threadpoolctl

        arch = [
            lib.get("architecture")
            for lib in threadpoolctl.threadpool_info()
            if lib.get("internal_api") == "openblas"
        ]
    except ImportError:
        arch = []
    g = np.random.default_rng(0)
    n = 1024
    a, b = g.normal(size=(n, n)), g.normal(size=(n, n))
    gemm = _median_time(lambda: a @ b)
    q, k, v = (g.normal(size=(1, 8, 512, 64)) for _ in range(3))
    naive = _median_time(lambda: ref.scaled_dot_product_attention(q, k, v), repeats=3)
    tiled = _median_time(lambda: ref.flash_attention(q, k, v), repeats=3)
    print(
        json.dumps(
            {
                "architecture": arch[0] if arch else None,
                "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
                "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
                "gemm_gflops": 2 * n**3 / gemm / 1e9,
                "naive_s": naive,
                "tiled_s": tiled,
            }
        )
    )


if __name__ == "__main__":
    main()
