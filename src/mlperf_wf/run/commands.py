"""The subcommands a job runs around its training: a tiny run, the node check, the run folder emptied before an
attempt, the processes' logs merged after it, its provenance, the set's campaign identity, power sampling (each flag's
parsing here, the work in its module)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from mlperf_wf.command import Command
from mlperf_wf.kinds import Scale

log = logging.getLogger("mlperf_wf")  # the CLI's own lines, under the name its logs have always had


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--run-index", type=int, required=True, dest="run", help="index of the run (its seed is chosen by the caller)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--data", type=Path, required=True, help="the prepared dataset tree")
    p.add_argument("--input", action="append", default=[], help="ROLE=FOLDER, one per input role the runs read (e.g. checkpoint)")
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--ruleset", required=True)
    p.add_argument("--org", required=True)
    p.add_argument("--platform", required=True)
    p.add_argument("--division", choices=["closed", "open"], required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hyperparameters", help="JSON object of overrides of the benchmark's tiny hyperparameters")


def _train(args: argparse.Namespace) -> None:
    import platform

    from mlperf_wf.run import harness
    from mlperf_wf.run.mllog_utils import Submission

    submission = Submission(org=args.org, platform=args.platform, division=args.division, status=args.status)
    log.info("run %d on host %s", args.run, platform.node())
    summary = harness.train(args.benchmark, args.seed, args.data, args.input, args.result, args.ruleset, submission, args.threads, args.hyperparameters)
    log.info("run %d (seed %d): %s", args.run, args.seed, json.dumps({k: v for k, v in summary.items() if k != "history"}))


TRAIN = Command("train", help="one tiny-scale training run", add_arguments=_train_arguments, run=_train)


def _node_check_arguments(p: argparse.ArgumentParser) -> None:
    check_sub = p.add_subparsers(dest="node_check_command", required=True)
    q = check_sub.add_parser("probe", help="check this node: all-reduce with the others, matrix multiply, the data's names and sizes, GPUs")
    q.add_argument("--out", type=Path, required=True, help="the attempt's folder (this node writes <hostname>.json)")
    q.add_argument("--nodes", type=int, required=True)
    q.add_argument("--master-addr", required=True, help="the first node of the job")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--prepared", type=Path, help="the prepared tree the run reads (checked against its stamps)")
    q.add_argument("--input", action="append", default=[], help="ROLE=FOLDER:VERIFICATION_RECORD of a dataset the run reads (repeatable)")
    q.add_argument("--matrix-size", type=int, default=8192)
    q.add_argument("--matmul-tflops", type=float, help="least TFLOPS per device measured")
    q.add_argument("--gpu-matmul-tflops", type=float, help="least TFLOPS per GPU (not applied to a CPU measurement)")
    q.add_argument("--allreduce-gbps", type=float, help="least all-reduce bus bandwidth (GB/s)")
    q.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the other nodes")
    q = check_sub.add_parser("verdict", help="every node's record of an attempt: fail naming the bad nodes, and exclude them")
    q.add_argument("--out", type=Path, required=True)
    q.add_argument("--hosts", required=True, help="comma-separated nodes of the job")
    q.add_argument("--excluded", type=Path, required=True, help="the file of excluded nodes the train rule reads")


def _node_check(args: argparse.Namespace) -> int:
    """probe: check this node into --out; verdict: read every node's record, fail naming the bad ones."""
    from mlperf_wf.run import node_check

    if args.node_check_command == "probe":
        record = node_check.probe(
            args.out,
            args.nodes,
            node_check.environment_rank(),
            args.master_addr,
            args.port,
            args.prepared,
            node_check.role_paths(args.input),
            args.matrix_size,
            args.matmul_tflops,
            args.allreduce_gbps,
            args.timeout,
            args.gpu_matmul_tflops,
        )
        print(f"node check of {record['host']}: {record['problem'] or 'passed'}", file=sys.stderr)
        return 1 if record["problem"] else 0
    passed, message, _ = node_check.verdict(args.out, [host for host in args.hosts.split(",") if host], args.excluded)
    print(f"mlperf-wf: {message}", file=sys.stderr)
    return 0 if passed else 1


NODE_CHECK = Command(
    "node-check",
    help="readiness of every node of a full-scale run before it starts (a train job runs it)",
    add_arguments=_node_check_arguments,
    run=_node_check,
)


def _fresh_run_folder(args: argparse.Namespace) -> None:
    from mlperf_wf.run.run_folder import clear_for_new_attempt

    removed = clear_for_new_attempt(args.folder)
    print(f"{args.folder}: removed what an earlier attempt left: {', '.join(removed)}" if removed else f"{args.folder}: empty")


FRESH_RUN_FOLDER = Command(
    "fresh-run-folder",
    help="empty a run's folder before an attempt (nothing of an earlier attempt is resumed)",
    add_arguments=lambda p: p.add_argument("folder", type=Path),
    run=_fresh_run_folder,
)


def _merge_mllog(args: argparse.Namespace) -> None:
    from mlperf_wf.run.mllog_parts import merge

    print(f"{args.result}: {merge(args.result)} lines, every writer's in time order")


MERGE_MLLOG = Command(
    "merge-mllog",
    help="after a run: its processes' MLLOG files (mllog-parts/) into its result file, in time order",
    add_arguments=lambda p: p.add_argument("result", type=Path),
    run=_merge_mllog,
)


def _provenance_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--launcher", required=True)
    p.add_argument("--image", default="")
    p.add_argument("--command", default="", dest="command_line", help="the run's command line")
    p.add_argument("--result", type=Path, help="the run log the job wrote: its sha256 is recorded")
    p.add_argument("--consumed", type=Path, nargs="*", default=[], help="what the run read (its inputs): their digests are recorded")
    p.add_argument("--node-checks", type=Path, help="the run's node-check folder: every attempt's verdict is recorded")
    p.add_argument("--config", default="", dest="config_json", help="the benchmark's resolved config (JSON, from the plan)")


def _provenance(args: argparse.Namespace) -> None:
    from mlperf_wf.run import provenance

    provenance.record_run(args.out, args.scale, args.launcher, args.image, args.command_line, args.result, args.consumed, args.node_checks, args.config_json)


PROVENANCE = Command(
    "provenance",
    help="record what a run was made with (backend, image, host, GPUs, git commit, versions)",
    add_arguments=_provenance_arguments,
    run=_provenance,
)


def _identity_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", required=True, dest="identity_json", help="the identity, as the plan makes it")
    p.add_argument("--out", type=Path, required=True)


def _identity(args: argparse.Namespace) -> None:
    from mlperf_wf.run import identity

    identity.write_expected_json(args.identity_json, args.out)


IDENTITY = Command(
    "identity",
    help="write the campaign identity a benchmark's runs must share (results/<scale>/<benchmark>/identity.json)",
    add_arguments=_identity_arguments,
    run=_identity,
)


def _power_sample_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", type=Path, required=True, help="the run's power/<result name>/ folder")
    p.add_argument("--node-index", type=int, help="k of node_<k>.txt (default: $SLURM_NODEID, else 0)")
    p.add_argument("--interval-ms", type=int, default=1000)
    p.add_argument("--gpu-command", help="command printing '[timestamp,] index, watts' per GPU ({interval_ms} is replaced); default nvidia-smi")
    p.add_argument("--node-command", help="command printing the node's watts, run every interval (instead of the GPUs' sum)")
    p.add_argument("--conversion-eff", type=float, help="logged as conversion_eff")
    p.add_argument("--stop-file", type=Path, help="stop when this file exists")


def _power_sample(args: argparse.Namespace) -> None:
    """Sample this node's power into OUT_DIR/node_<k>.txt until the stop file appears or SIGTERM."""
    from mlperf_wf.config.workflow_config import PowerConfig
    from mlperf_wf.run import power

    raw = {"enabled": True, "interval_ms": args.interval_ms, "node_command": args.node_command or "", "conversion_eff": args.conversion_eff}
    config = PowerConfig.from_config({**raw, **({"gpu_command": args.gpu_command} if args.gpu_command else {})})
    index = args.node_index if args.node_index is not None else int(os.environ.get("SLURM_NODEID", "0"))
    summary = power.run_sampler(config, args.out_dir, index, args.stop_file)
    mean = f"{summary.mean_watts:.1f} W mean" if summary.mean_watts is not None else "no reading"
    log.info("%s: %d readings, %s%s", summary.file, summary.readings, mean, f"; {'; '.join(summary.problems)}" if summary.problems else "")


POWER_SAMPLE = Command(
    "power-sample",
    help="power logs of this node in the MLPerf Power format, beside a run, until --stop-file appears",
    add_arguments=_power_sample_arguments,
    run=_power_sample,
)


def _job(args: argparse.Namespace) -> int:
    from mlperf_wf.run import job

    return job.run(args.spec)


def _job_arguments(parser: argparse.ArgumentParser) -> None:
    from mlperf_wf.run import job

    job.add_arguments(parser)


JOB = Command("job", "run one job of the workflow from its spec (JSON), as the train rule does", _job_arguments, _job)

COMMANDS = (JOB, TRAIN, NODE_CHECK, FRESH_RUN_FOLDER, MERGE_MLLOG, PROVENANCE, IDENTITY, POWER_SAMPLE)
"""The run stage's subcommands, in the order the help lists them."""
