"""Print kernel-vs-stock and kernel-vs-copy ratios from a pytest-benchmark JSON file.

Usage: python benchmarks/summarize.py reports/bench_kernels.json
"""

import json
import sys


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
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


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "reports/bench_kernels.json")
