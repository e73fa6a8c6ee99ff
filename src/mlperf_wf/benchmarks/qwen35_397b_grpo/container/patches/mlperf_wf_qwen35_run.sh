#!/bin/bash
# One per node of a qwen35_397b_grpo run: what the reference's run.sub does around its driver (NeMo-RL 3fca04c9
# docker/mlperf/run.sub, not in our reference copy; qwen35_grpo_rcp_launch_instructions.md:187-193): build a Ray
# cluster over the allocation (one Ray worker unit per GPU) and start the GRPO driver once, on the head.
#   mlperf_wf_qwen35_run.sh [--nodes N --node-rank R --master-addr HOST --master-port PORT] DRIVER COMMAND...
# Node rank 0 starts the Ray head, waits until all N nodes have joined, runs the driver, writes the driver's exit
# status to the status file and stops Ray; every other node joins the head and blocks until the status file appears
# (then it stops its Ray node and exits 0) or its Ray node ends without it (then it exits with Ray's status).
# Why: run.sub starts the workers as background steps and judges the driver's step alone, while here every node is
# one task of the job's single step; a worker's `ray start --block` exits 1 when the head stops, which failed every
# successful run (and the profile's retry relaunched the whole allocation). The driver's status is the job's.
#   --status-file PATH  (default /logs/mlperf_wf_driver_status: the run's scratch, shared by every node)
set -euo pipefail

nodes=1 node_rank=0 master_addr=127.0.0.1 master_port=6379 status_file=/logs/mlperf_wf_driver_status
while [[ $# -gt 0 ]]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --node-rank) node_rank="$2"; shift 2 ;;
        --master-addr) master_addr="$2"; shift 2 ;;
        --master-port) master_port="$2"; shift 2 ;;
        --status-file) status_file="$2"; shift 2 ;;
        --) shift; break ;;
        -*) echo "mlperf_wf_qwen35_run: unknown option $1 (known: --nodes --node-rank --master-addr --master-port --status-file)" >&2; exit 2 ;;
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
    ray start --address="${master_addr}:${master_port}" --num-gpus="${gpus}" --block &
    ray_node=$!
    while kill -0 "${ray_node}" 2>/dev/null && [[ ! -e "${status_file}" ]]; do sleep 2; done
    if [[ -e "${status_file}" ]]; then
        # the driver ended: this node's part is done whatever the driver's status (the head's task reports it)
        ray stop --force >/dev/null 2>&1 || true
        wait "${ray_node}" || true
        exit 0
    fi
    status=0
    wait "${ray_node}" || status=$?
    [[ -e "${status_file}" ]] && exit 0
    echo "mlperf_wf_qwen35_run: the Ray node on $(hostname) ended (status ${status}) before the driver finished" >&2
    exit $(( status == 0 ? 1 : status ))
fi

rm -f "${status_file}"  # a retried attempt's workers must not take an earlier attempt's status for this one's
ray start --head --port="${master_port}" --num-gpus="${gpus}"
trap 'ray stop --force >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 600); do
    joined="$(python3 -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(sum(1 for n in ray.nodes() if n["Alive"]))')"
    [[ "${joined}" -ge "${nodes}" ]] && break
    sleep 2
done
[[ "${joined}" -ge "${nodes}" ]] || { echo "mlperf_wf_qwen35_run: only ${joined} of ${nodes} nodes joined the Ray cluster in 20 minutes" >&2; exit 1; }
status=0
"$@" || status=$?
echo "${status}" > "${status_file}"
exit "${status}"
