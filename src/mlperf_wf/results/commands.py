"""The subcommands over a campaign's plan and results: preflight and sizing, the offline bundle, where a campaign
stands and the gate before each train job, compliance, the report, figures and pages, the summary, the submission
package, and scoring any folder of logs (each flag's parsing here, the work in its module)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path

from mlperf_wf.command import Command
from mlperf_wf.kinds import Scale

log = logging.getLogger("mlperf_wf")  # the CLI's own lines, under the name its logs have always had


def _merged_config(configfiles: list[Path], overrides: dict) -> dict:
    """The workflow config of the current folder with each ``--configfile`` merged in order, then ``overrides``."""
    from mlperf_wf.config.config_check import read_configfile
    from mlperf_wf.config.workflow_config import merge_config
    from mlperf_wf.results import status

    config = status.load_config(Path.cwd(), [])
    for configfile in configfiles:
        merge_config(config, read_configfile(configfile))
    merge_config(config, overrides)
    return config


def _preflight_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", action="append", default=[], help="a benchmark to check (repeatable; default: the config's benchmarks)")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="the --config values Snakemake is given (e.g. launcher=pyxis)")
    p.add_argument("--configfile", type=Path, action="append", default=[], help="a config file Snakemake is given (--configfile), merged in order")
    p.add_argument("--image", help="one train job: the image reference it uses (name@sha256:...); none with the local launcher")
    p.add_argument("--platform", help="one train job: its submission.platform (the tiny tier's is refused)")


def _preflight(args: argparse.Namespace) -> int:
    """Every problem of a full-scale plan at once, one line each; 2 when there is any. With --image or --platform: the
    checks of one train job on its node, for its one --benchmark. Otherwise the full-scale plan of the config
    (config/config.yaml, each --configfile, then --config values, as Snakemake merges them)."""
    from mlperf_wf.config.checkout import project_root
    from mlperf_wf.config.config_check import config_overrides
    from mlperf_wf.errors import ConfigError
    from mlperf_wf.plan import preflight

    benchmarks = args.benchmark
    if args.image is not None or args.platform is not None:
        if len(benchmarks) != 1:
            raise ConfigError("preflight: --image/--platform check one train job: give exactly one --benchmark")
        problems = preflight.run_problems(benchmarks[0], args.image, args.platform)
        what = f"the train job of {benchmarks[0]}"
    else:
        logging.getLogger().setLevel(logging.WARNING)
        config = _merged_config(args.configfile, config_overrides(args.config))
        names = benchmarks or list(config["benchmarks"])
        problems = preflight.config_problems(config, project_root(), Path.cwd(), names)
        what = f"the full-scale plan of {', '.join(names)}"
    if problems:
        print(f"mlperf-wf: error: {preflight.describe(problems, what)}", file=sys.stderr)
        return 2
    print(f"preflight: no problem in {what}")
    return 0


PREFLIGHT = Command(
    "preflight",
    help="every problem of a full-scale plan before anything is queued (one line each; exit 2 if any)",
    description="Checks the full-scale plan of the config for every benchmark given (default: the config's): the ruleset "
    "holds it, images pinned by digest, a real platform with its system description, credentials for data still to "
    "download, data the workflow does not fetch in place, free space for the runs' scratch areas. With --image or "
    "--platform: the checks of one train job (its job line runs them on the node).",
    add_arguments=_preflight_arguments,
    run=_preflight,
    people=True,
)


def _size_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--gpus-per-node", type=int, required=True)
    p.add_argument("--ruleset", default="latest", help="a training round (default: the benchmark's newest)")
    p.add_argument("--gbs", type=int, help="the global batch size to detail (default: the plan's, else the smallest RCP the system can make)")
    p.add_argument("--throughput", type=float, help="training samples per second per GPU (a measured first run), for the walltime")
    p.add_argument("--throughput-from", type=Path, metavar="RESULT", help="measure the throughput on a finished run's log made on this system")
    p.add_argument("--accelerator", help="the system's accelerator (H100, B200, MI300X or a model name), for the expected time to train from published results")
    p.add_argument("--gpu-memory-gib", type=float, help="memory of one GPU (GiB): a micro batch the GPU holds, where less than the reference's")


def _size(args: argparse.Namespace) -> int:
    """The global batch sizes a system can run, their RCP coverage and, for the chosen one, the RCP's hyperparameters,
    the split and a walltime; the throughput given, or measured on a finished run's log made on this system."""
    from mlperf_wf.config import mlperf_rules, registry
    from mlperf_wf.errors import ConfigError
    from mlperf_wf.plan import sizing

    if args.benchmark not in registry.benchmark_names():
        raise ConfigError(f"size: --benchmark {args.benchmark!r} is not a benchmark; known: {', '.join(registry.benchmark_names())}")
    for flag, value in (("--nodes", args.nodes), ("--gpus-per-node", args.gpus_per_node), ("--gbs", args.gbs or 1), ("--throughput", args.throughput or 1)):
        if value <= 0:
            raise ConfigError(f"size: {flag} {value} must be positive")
    bench = registry.load_benchmark(args.benchmark)
    resolved = mlperf_rules.resolve_ruleset(bench.submission_benchmark, args.ruleset)
    throughput = args.throughput
    if args.throughput_from is not None:
        from mlperf_wf.results.status import measured_throughput

        throughput = measured_throughput(args.throughput_from, bench, args.nodes * args.gpus_per_node)
        print(f"measured on {args.throughput_from}: {throughput:.4g} samples/s per GPU (run_start to its last evaluation)")
    report = sizing.size_report(bench, resolved, args.nodes, args.gpus_per_node, args.gbs, throughput, args.accelerator, args.gpu_memory_gib)
    print("\n".join(report))
    return 0


SIZE = Command(
    "size",
    help="global batch sizes a system can run, their RCPs, hyperparameters and walltime",
    add_arguments=_size_arguments,
    run=_size,
    people=True,
)


def _bundle_arguments(p: argparse.ArgumentParser) -> None:
    bundle_sub = p.add_subparsers(dest="bundle_command", required=True)
    q = bundle_sub.add_parser(
        "export", help="pinned images (OCI archive, enroot squashfs; none needed at tiny scale), verified datasets and wheels, with sha256s"
    )
    q.add_argument("--benchmark", action="append", required=True, help="a benchmark to carry (repeatable)")
    q.add_argument("--scale", choices=("tiny", "full"), default="full")
    q.add_argument("--out", type=Path, required=True, help="a new or empty folder for the bundle (or one whose export did not finish: made again)")
    q.add_argument("--configfile", type=Path, action="append", default=[], help="a config file the campaign runs with (as snakemake's)")
    q.add_argument("--wheels-from", type=Path, action="append", default=[], help="a folder of more wheels to carry (pip download -d)")
    q.add_argument("--squashfs", action=argparse.BooleanOptionalAction, default=None, help="enroot images (default: where mksquashfs exists)")
    q = bundle_sub.add_parser("import", help="check every file of a bundle, then place its images and datasets and write config/site.yaml")
    q.add_argument("bundle", type=Path)
    q.add_argument("--images", type=Path, help="the site's image folder, on the filesystem the compute nodes share (default: resources/images)")
    q.add_argument("--docker", action="store_true", help="also load the images into this node's Docker engine (DOCKER_HOST)")
    q.add_argument("--expect", help="the sha256 of bundle.json that export printed")
    q.add_argument("--sif", action=argparse.BooleanOptionalAction, default=None, help="Apptainer SIF images (default: where apptainer exists)")


def _bundle(args: argparse.Namespace) -> None:
    """export: write the offline bundle of the benchmarks and print what the other side types; import: check a bundle,
    place its images and datasets and write config/site.yaml."""
    from mlperf_wf.config.checkout import project_root
    from mlperf_wf.plan import bundle

    if args.bundle_command == "export":
        config = _merged_config(args.configfile, {"benchmarks": args.benchmark, "scale": args.scale})
        digest = bundle.export(Path.cwd(), project_root(), args.out, config, args.wheels_from, args.squashfs)
        print(f"bundle: {args.out} ({bundle.BUNDLE_FILE} {digest})")
        print(f"on the site: mlperf-wf --root WORKFLOW_FOLDER bundle import {args.out} --expect {digest}")
        return
    images = args.images or Path.cwd() / "resources" / "images"
    site = bundle.import_bundle(args.bundle, Path.cwd(), images, args.docker, args.expect, args.sif)
    if site is None:
        print(f"bundle: every file of {args.bundle} matches {bundle.BUNDLE_FILE}; its datasets are placed (it carries no image)")
    else:
        print(f"bundle: every file of {args.bundle} matches {bundle.BUNDLE_FILE}; the plan now starts the local images ({site})")


BUNDLE = Command(
    "bundle",
    help="an offline bundle for a site without network: export it here, import it there",
    add_arguments=_bundle_arguments,
    run=_bundle,
    people=True,
)


def _positive_seconds(text: str) -> float:
    """argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def _status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="the --config values Snakemake was given (e.g. runs=3)")
    p.add_argument("--benchmark", action="append", default=[], help="show only this benchmark (repeatable; default: the config's benchmarks)")
    p.add_argument("--json", action="store_true", dest="as_json", help="JSON for scripts")
    p.add_argument("--watch", type=_positive_seconds, nargs="?", const=30.0, metavar="SECONDS", help="refresh every SECONDS (default 30) until interrupted")
    p.add_argument("--squeue", default="squeue", help="the squeue command to ask (default: squeue on PATH)")


def _status(args: argparse.Namespace) -> int:
    """Print where the campaign in the current folder stands; with --watch, again every SECONDS. Reads only."""
    import time

    from mlperf_wf.config import registry
    from mlperf_wf.config.checkout import project_root
    from mlperf_wf.plan import plan as planning
    from mlperf_wf.results import invocation, status

    logging.getLogger().setLevel(logging.WARNING)  # mlperf-logging's checker reports every file at INFO
    config_overrides, benchmarks = args.config, args.benchmark
    # no arguments: what the running (or the last) Snakemake invocation targets, not the config file's benchmarks
    followed = None if config_overrides or benchmarks else invocation.current(Path.cwd(), registry.benchmark_names())
    if followed is not None:
        config_overrides, benchmarks = followed.config_items(), followed.benchmarks
    config = status.load_config(Path.cwd(), config_overrides)
    plan = planning.load(config, project_root=project_root(), workdir=Path.cwd())
    runs_given = any(item.partition("=")[0] == "runs" for item in config_overrides)
    try:
        while True:
            now = status.campaign_status(Path.cwd(), config, benchmarks or None, runs_given, args.squeue, plan)
            if args.as_json:
                text = json.dumps({**status.to_json(now), "follows": dataclasses.asdict(followed) if followed else None}, indent=2)
            else:
                text = (f"{followed.describe()}\n" if followed else "") + status.render(now)
            if args.watch is None:
                print(text)
                return 0
            print("\033[H\033[2J" + text if sys.stdout.isatty() else text + "\n", flush=True)
            time.sleep(args.watch)
    except KeyboardInterrupt:  # how --watch ends, between refreshes or during one
        return 0


STATUS = Command(
    "status",
    help="where a campaign stands: runs done/running/queued/failed, last eval, time left, shards, verdicts (reads only)",
    description="Read the campaign in --root (default: here) while or after Snakemake runs it, locally or under --profile slurm "
    "(squeue gives pending/running of the jobs Snakemake handed to SLURM). Writes nothing and takes no lock.",
    add_arguments=_status_arguments,
    run=_status,
    people=True,
)


def _campaign_gate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--run", type=int, required=True, help="the run index of this job")
    p.add_argument("--config-file", type=Path, required=True, help="the running Snakemake's config (logs/<scale>/campaign_config.json)")


def _campaign_gate(args: argparse.Namespace) -> int:
    from mlperf_wf.results import campaign_gate

    logging.getLogger().setLevel(logging.WARNING)  # mlperf-logging's checker reports every file at INFO
    code, line = campaign_gate.gate(Path.cwd(), args.benchmark, args.run, args.config_file)
    print(line, flush=True)
    return code


CAMPAIGN_GATE = Command(
    "campaign-gate",
    help="before a train job: end it, not started (exit 3), when its benchmark's set can no longer be valid (stop_when_doomed)",
    add_arguments=_campaign_gate_arguments,
    run=_campaign_gate,
)


def _compliance_arguments(p: argparse.ArgumentParser) -> None:
    # No type= on the positional: argparse would turn its SUPPRESS default into a path and hide --result.
    p.add_argument("result", nargs="?", default=argparse.SUPPRESS, help="the result file (or --result)")
    p.add_argument("--result", type=Path, dest="result", default=None, help="the result file (instead of the positional RESULT)")
    p.add_argument("--ruleset", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--benchmark", help="workflow benchmark name: with --scale tiny, its tiny tier's declared open rules apply")
    p.add_argument("--scale", choices=list(Scale))
    p.add_argument("--seed", type=int, help="the run's seed: the log must be this run's (with --benchmark and --division)")
    p.add_argument("--division", choices=["closed", "open"], help="the run's division, which the log must name")
    p.add_argument("--provenance", type=Path, help="the run's provenance.json: the log must be the bytes its train job wrote")


def _compliance(args: argparse.Namespace) -> None:
    from mlperf_wf.results import compliance

    verdict = compliance.check_run(args.result, args.ruleset, args.out, args.benchmark, args.scale, args.seed, args.division, args.provenance)
    log.info("%s: %s", args.result, verdict.verdict)


COMPLIANCE = Command(
    "compliance",
    help="official compliance check of one result file",
    add_arguments=_compliance_arguments,
    run=_compliance,
    people=True,
)


def _score_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        type=Path,
        help=(
            "a round's folder of organisations, an organisation folder, a benchmark folder of result_*.txt, workflow results/<benchmark>/,"
            " or a folder of logs (*.out, *.log, *.txt with :::MLLOG)"
        ),
    )
    p.add_argument("--ruleset", help="the round to score under (default: the one the folder's report.json records)")
    p.add_argument("--json", type=Path, dest="json_out")
    p.add_argument("--csv", type=Path, dest="csv_out")
    p.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    p.add_argument("--rcp-bypass", action="store_true", help="as the package checker's --rcp-bypass")


def _score(args: argparse.Namespace) -> int:
    """Score every (system, benchmark) under PATH; exit 1 when any result is invalid."""
    from mlperf_wf.results import score_folder

    ruleset = args.ruleset
    if not ruleset:
        ruleset, report = score_folder.recorded_ruleset(args.path)
        print(f"mlperf-wf: score: ruleset {ruleset} (from {report})", file=sys.stderr)
    scores = score_folder.score_folder(args.path, ruleset, args.json_out, args.csv_out, args.jobs, args.rcp_bypass)
    for line in score_folder.score_lines(scores):
        print(line)
    return 0 if all(s.valid for s in scores) else 1


SCORE = Command(
    "score",
    help="official time-to-train scores of any log folder",
    add_arguments=_score_arguments,
    run=_score,
    people=True,
)


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--ruleset", required=True)
    p.add_argument("--division", choices=["closed", "open"], required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--platform", required=True, help="system name the runs were made on")
    p.add_argument("--result", type=Path, action="append", default=[])
    p.add_argument("--compliance", type=Path, action="append", default=[])
    p.add_argument("--provenance", type=Path, action="append", default=[], help="provenance.json of each run (optional)")
    p.add_argument("--identity", type=Path, help="the campaign identity the runs must share (identity.json, written by the workflow)")
    p.add_argument(
        "--doomed",
        help="JSON: the set can no longer be valid and its runs not started were not made (the doomed record of mlperf-wf status --json); "
        "--result gives its finished runs",
    )
    p.add_argument("--out", type=Path, required=True)


def _report(args: argparse.Namespace) -> None:
    from mlperf_wf.results import report

    made = report.write_benchmark_report(
        args.benchmark,
        args.ruleset,
        args.division,
        args.scale,
        args.platform,
        args.result,
        args.compliance,
        args.provenance,
        args.out,
        args.identity,
        args.doomed,
    )
    log.info("%s: time to train %s min over runs %s", args.benchmark, made.score["time_to_train_minutes"], made.score["counted_runs"])


REPORT = Command("report", help="time-to-train report of a benchmark's runs", add_arguments=_report_arguments, run=_report)


def _plot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", type=Path)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument(
        "--reference-logs",
        type=Path,
        help="folder of reference convergence logs (e.g. the reference's RCP runs; compliance not needed) drawn beside the runs",
    )


def _plot(args: argparse.Namespace) -> None:
    from mlperf_wf.errors import ConfigError
    from mlperf_wf.results import plots

    if args.reference_logs is not None and not args.reference_logs.is_dir():
        raise ConfigError(f"--reference-logs: {args.reference_logs} is not a folder; give a folder of :::MLLOG logs (searched recursively)")
    for path in plots.benchmark_figures(args.report, args.out_dir, args.reference_logs):
        log.info("wrote %s", path)


PLOT = Command("plot", help="figures of one benchmark's report", add_arguments=_plot_arguments, run=_plot)


def _overview_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", type=Path)
    p.add_argument("--figure", type=Path, action="append", default=[], help="an SVG figure shown inline (repeatable)")
    p.add_argument("--out", type=Path, required=True)


def _overview(args: argparse.Namespace) -> None:
    from mlperf_wf.results import overview

    log.info("wrote %s", overview.write(args.report, args.figure, args.out))


OVERVIEW = Command(
    "overview",
    help="one benchmark's page of the HTML report: score, ruleset, runs with verdicts, RCP, figures",
    add_arguments=_overview_arguments,
    run=_overview,
)


def _summary_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", type=Path, nargs="+")
    p.add_argument(
        "--package-check", type=Path, action="append", default=[], help="package_check.json of a submission package (repeatable: one per round and division)"
    )
    p.add_argument("--csv", type=Path, required=True, dest="csv_out")
    p.add_argument("--figure", type=Path, required=True, help="output stem; .png and .svg are written")


def _summary(args: argparse.Namespace) -> None:
    from mlperf_wf.results import plots

    frame = plots.summary(args.reports, args.csv_out, args.figure, args.package_check)
    log.info("summary of %d benchmarks written to %s", len(frame), args.csv_out)


SUMMARY = Command("summary", help="summary.csv and figure across benchmarks", add_arguments=_summary_arguments, run=_summary)


def _package_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", type=Path, nargs="+")
    p.add_argument("--org", required=True)
    p.add_argument("--system", required=True, help="system name; its description is config/systems/<system>.yaml")
    p.add_argument("--ruleset", required=True)
    p.add_argument("--division", choices=["closed", "open"], default="closed", help="the package's division; reports of the other stay out")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--check-out", type=Path, required=True)


def _package(args: argparse.Namespace) -> int:
    from mlperf_wf.results import package

    org_dir, verdict = package.package_reports(args.reports, args.org, args.system, args.ruleset, args.division, args.out, args.check_out)
    log.info("package %s: package checker %s", org_dir, "passed" if verdict["package_checker"]["passed"] else "found errors")
    return 0


PACKAGE = Command(
    "package",
    help="submission package of the scored runs, checked by the official checkers",
    add_arguments=_package_arguments,
    run=_package,
)


def _rehearse(args: argparse.Namespace) -> int:
    from mlperf_wf.results import rehearse

    return rehearse.run(args)


def _rehearse_arguments(parser: argparse.ArgumentParser) -> None:
    from mlperf_wf.results import rehearse

    rehearse.add_arguments(parser)


REHEARSE = Command(
    "rehearse",
    "before a campaign: the benchmark's full-scale job on 2 nodes (1 for one-node benchmarks) for a few steps, with a verdict per check",
    _rehearse_arguments,
    _rehearse,
    people=True,
    description="Submits through the campaign's profile the benchmark's full-scale train job (its image, mounts, launcher and node check) on "
    "two nodes, stops it after --steps training steps and prints one verdict per check. Writes only under rehearsal/<benchmark>/.",
)

COMMANDS = (REHEARSE, PREFLIGHT, SIZE, STATUS, SCORE, COMPLIANCE, BUNDLE, CAMPAIGN_GATE, REPORT, PLOT, OVERVIEW, SUMMARY, PACKAGE)
"""The plan's and results' subcommands, in the order the help lists them."""
