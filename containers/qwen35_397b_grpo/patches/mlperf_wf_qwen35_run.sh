#!/bin/bash
# One per node of a qwen35_397b_grpo run: what the reference's run.sub does around its driver (NeMo-RL 3fca04c9
# docker/mlperf/run.sub, not in our reference copy; qwen35_grpo_rcp_launch_instructions.md:187-193): build a Ray
# cluster over the allocation (one Ray worker unit per GPU) and start the GRPO driver once, on the head.
#   mlperf_wf_qwen35_run.sh [--nodes N --node-rank R --master-addr HOST --master-port PORT] DRIVER COMMAND...
# Node rank 0 starts the Ray head, waits until all N nodes have joined, runs the driver and stops Ray (which ends
# the other nodes' blocking workers); every other node joins the head and blocks.
set -euo pipefail

nodes=1 node_rank=0 master_addr=127.0.0.1 master_port=6379
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --node-rank) node_rank="$2"; shift 2 ;;
        --master-addr) master_addr="$2"; shift 2 ;;
        --master-port) master_port="$2"; shift 2 ;;
        --) shift; break ;;
        -*) echo "mlperf_wf_qwen35_run: unknown option $1 (known: --nodes --node-rank --master-addr --master-port)" >&2; exit 2 ;;
        *) break ;;
    esac
done
[[ $# -gt 0 ]] || { echo "mlperf_wf_qwen35_run: no driver command given" >&2; exit 2; }
gpus="$(nvidia-smi --list-gpus | wc -l)"

# The workflow's submission values reach the reference's logger under the names its site data config uses
# (README.md:299-310); the round patch also rewrites the submission_* events it logs.
export MLPERF_SUBMITTER="${MLPERF_SUBMISSION_ORG:-${MLPERF_SUBMITTER:-}}"
export MLPERF_STATUS="${MLPERF_SUBMISSION_STATUS:-${MLPERF_STATUS:-}}"
export MLPERF_SYSTEM_NAME="${MLPERF_SUBMISSION_PLATFORM:-${MLPERF_SYSTEM_NAME:-}}"

if [[ "${node_rank}" != 0 ]]; then
    exec ray start --address="${master_addr}:${master_port}" --num-gpus="${gpus}" --block
fi

ray start --head --port="${master_port}" --num-gpus="${gpus}"
trap 'ray stop --force >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 600); do
    joined="$(python3 -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(sum(1 for n in ray.nodes() if n["Alive"]))')"
    [[ "${joined}" -ge "${nodes}" ]] && break
    sleep 2
done
[[ "${joined}" -ge "${nodes}" ]] || { echo "mlperf_wf_qwen35_run: only ${joined} of ${nodes} nodes joined the Ray cluster in 20 minutes" >&2; exit 1; }
"$@"
