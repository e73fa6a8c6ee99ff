"""What torch's OpenMP wait policy costs on a busy machine, the reason ``tests/conftest.py`` sets
``OMP_WAIT_POLICY=PASSIVE`` for ``make test`` (three workers on two cores).

    python bench/omp_wait_policy.py [--steps 1500] [--busy 1]

Runs the same tiny training (a two-layer MLP, AdamW, torch's default threads: one per core) in a fresh process under
libgomp's default policy (the baseline: a waiting thread spins before it sleeps) and under ``PASSIVE`` (it sleeps at
once), while ``--busy`` other processes keep cores busy, as the other test workers do. Prints each one's CPU and wall
seconds and the baseline's CPU over PASSIVE's. Both runs compute the same losses: the policy changes only how
threads wait.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

TRAINING = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
optimizer = torch.optim.AdamW(model.parameters())
batch = torch.randn(64, 256)
for _ in range(int(sys.argv[1])):
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(f"{loss.item():.9g} {torch.get_num_threads()}")
"""


def measure(steps: int, policy: str | None) -> tuple[float, float, str]:
    """(CPU s, wall s, last loss and threads) of one training process under ``policy`` (None: libgomp's default)."""
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", TRAINING, str(steps)], env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall, out.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--busy", type=int, default=1, help="processes that keep a core busy meanwhile")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        default_cpu, default_wall, default_out = measure(args.steps, None)
        passive_cpu, passive_wall, passive_out = measure(args.steps, "PASSIVE")
    finally:
        for process in busy:
            process.kill()
            process.wait()
    print(f"{os.cpu_count()} cores, {args.busy} kept busy, {args.steps} steps (final loss, threads)")
    print(f"  libgomp default (baseline): {default_cpu:6.2f} CPU s {default_wall:6.2f} wall s  ({default_out})")
    print(f"  OMP_WAIT_POLICY=PASSIVE:    {passive_cpu:6.2f} CPU s {passive_wall:6.2f} wall s  ({passive_out})")
    print(f"  baseline CPU / PASSIVE CPU: {default_cpu / passive_cpu:.2f}x; wall: {default_wall / passive_wall:.2f}x")
    if default_out.split()[0] != passive_out.split()[0]:
        print("  the losses differ: the policy changed the numerics")


if __name__ == "__main__":
    main()
