"""What the benchmark scripts put at the top of a child process to measure its peak anonymous memory.

Linux tracks no high-water mark of anonymous pages alone (``VmHWM`` also counts the file-backed pages a process
maps, which the page cache can drop), so the child samples ``RssAnon`` every 10 ms in a thread; its global
``peak`` holds the largest value seen, in bytes.
"""

SAMPLER = r"""
import json, sys, threading, time
peak = 0
def sample():
    global peak
    while True:
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                peak = max(peak, int(line.split()[1]) * 1024)
        time.sleep(0.01)
threading.Thread(target=sample, daemon=True).start()
"""


def medians(results: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    """Per mode (``baseline``, ``ours``), the median ``seconds`` and ``peak_anon_bytes`` of its child runs."""
    import statistics

    return {mode: {key: statistics.median(r[key] for r in runs) for key in ("seconds", "peak_anon_bytes")} for mode, runs in results.items()}


def print_ratio(median: dict[str, dict[str, float]]) -> None:
    """The line the benchmark scripts end with: ours against the baseline measured in the same run."""
    ours, baseline = median["ours"], median["baseline"]
    print(f"ratio ours/baseline: time {ours['seconds'] / baseline['seconds']:.2f}x, peak memory {ours['peak_anon_bytes'] / baseline['peak_anon_bytes']:.2f}x")
