"""The two H200 ceilings of SPEC §7, measured in the same run as the benchmarks:
a large device-to-device copy (bytes read + written) and a large bf16 matrix product."""
import json

import torch


def median_ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    n = 1 << 30  # 2 GiB of bf16 each way
    src = torch.rand(n, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 2 / (ms * 1e-3) / 1e9
    del src, dst
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: a @ b)
    mm_tflops = 2 * m**3 / (ms * 1e-3) / 1e12
    print(json.dumps({"copy_GBps": round(copy_gbs, 1), "bf16_mm_TFLOPs": round(mm_tflops, 1)}))


if __name__ == "__main__":
    main()
