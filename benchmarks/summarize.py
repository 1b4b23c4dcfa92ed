"""Print kernel-vs-stock and kernel-vs-copy ratios from a pytest-benchmark JSON file.

Usage: python benchmarks/summarize.py reports/bench_kernels.json
       python benchmarks/summarize.py reports/bench_kernels_cuda.json   (CUDA benchmark)
"""

import json
import sys


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    if any("cuda_us" in b.get("extra_info", {}) for b in data["benchmarks"]):
        summarize_cuda(data)
        return
    stats = {b["name"]: b["stats"] for b in data["benchmarks"]}
    print(f"machine: {data['machine_info'].get('cpu', {}).get('brand_raw', '?')}, "
          f"{data['machine_info'].get('cpu', {}).get('count', '?')} cpus")
    for group in ("sparse_adam", "adagrad", "coalesce"):
        stock = stats.get(f"test_{group}_stock")
        kernel = stats.get(f"test_{group}_kernel")
        copy = stats.get(f"test_{group}_copy")
        if not (stock and kernel):
            continue
        line = (f"{group:12s} stock median {stock['median'] * 1e3:8.2f} ms | kernel median "
                f"{kernel['median'] * 1e3:7.2f} ms | speedup {stock['median'] / kernel['median']:5.1f}x "
                f"(min-based {stock['min'] / kernel['min']:5.1f}x)")
        if copy:
            line += (f" | copy median {copy['median'] * 1e3:6.2f} ms, kernel/copy "
                     f"{kernel['median'] / copy['median']:4.1f}x (min-based {kernel['min'] / copy['min']:4.1f}x)")
        print(line)


def summarize_cuda(data: dict) -> None:
    """One line per group of benchmarks/test_bench_kernels_cuda.py: CUDA-event medians."""
    groups: dict[str, dict[str, dict]] = {}
    for b in data["benchmarks"]:
        info = b.get("extra_info", {})
        if "cuda_us" not in info:
            continue
        variant = b["params"].get("variant", "?") if b.get("params") else "?"
        groups.setdefault(b["group"], {})[variant] = {**info, "host_median_us": b["stats"]["median"] * 1e6}
    for group, variants in sorted(groups.items()):
        any_info = next(iter(variants.values()))
        print(f"{group} on {any_info['device']} (torch {any_info['torch']}), "
              f"floor {any_info['floor_us']:.1f} us:")
        stock = variants.get("stock", {}).get("cuda_us")
        for variant in ("stock", "kernel", "graph"):
            if variant not in variants:
                continue
            v = variants[variant]
            line = (f"  {variant:6s} {v['cuda_us']:9.1f} us (CUDA events)  {v['host_median_us']:9.1f} us "
                    f"(host, with sync)  {v['over_floor']:6.1f}x floor")
            if stock and variant != "stock":
                line += f"  {stock / v['cuda_us']:5.1f}x faster than stock"
            print(line)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reports/bench_kernels.json")
