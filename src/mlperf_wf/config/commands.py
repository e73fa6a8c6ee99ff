"""The config's subcommands: the definitions and config files checked, the files generated from the config model
written, a node's hardware probed into a system description (each flag's parsing here, the work in its module)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlperf_wf.command import Command


def _check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--import-modules", action="store_true", help="also import every benchmark and generator module (slow: torch)")
    p.add_argument("--configfile", type=Path, action="append", help="instead, pre-check a config file given to snakemake --configfile (repeatable)")
    p.add_argument("--profile", help="instead, pre-check a snakemake --profile (its name or folder)")


def _check(args: argparse.Namespace) -> int:
    """Validate every benchmark and dataset definition, each problem on one line; with --configfile or --profile,
    check those instead: what Snakemake reads before the workflow's code runs (the pre-check)."""
    if args.configfile or args.profile:
        from mlperf_wf.config import config_check
        from mlperf_wf.config.workflow_config import CONFIG_FILE

        for configfile in args.configfile or []:
            config_check.check_configfile(configfile, CONFIG_FILE)
            print(f"{configfile}: valid (merged over {CONFIG_FILE})")
        if args.profile:
            print(f"{config_check.check_profile(args.profile)}: valid")
        return 0
    from mlperf_wf.config import registry

    problems = registry.check_all(import_modules=args.import_modules)
    for problem in problems:
        print(f"mlperf-wf: error: {problem}", file=sys.stderr)
    if not problems:
        print(f"{len(registry.benchmark_names())} benchmarks and {len(registry.dataset_ids())} datasets: definitions valid")
    return 2 if problems else 0


CHECK = Command(
    "check",
    help="validate every benchmark and dataset definition (one line per problem)",
    add_arguments=_check_arguments,
    run=_check,
    people=True,
)


def _config_files(args: argparse.Namespace) -> int:
    """Write (or with --check compare) every file generated from the typed config model."""
    from mlperf_wf.config import workflow_config
    from mlperf_wf.config.checkout import project_root

    root = project_root()
    stale = workflow_config.stale_files(root)
    if args.check:
        for path in stale:
            print(f"mlperf-wf: error: {path}: differs from src/mlperf_wf/config/workflow_config.py; run mlperf-wf config-files", file=sys.stderr)
        return 1 if stale else 0
    for path, text in workflow_config.generated_files(root).items():
        if path in stale:
            path.write_text(text)
            print(f"wrote {path}")
    return 0


CONFIG_FILES = Command(
    "config-files",
    help="write the config schema, config/config.yaml and config/README.md's table from the typed config model "
    "(src/mlperf_wf/config/workflow_config.py); --check only says which differ",
    add_arguments=lambda p: p.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that differs from the model"),
    run=_config_files,
    people=True,
)


def _system_arguments(p: argparse.ArgumentParser) -> None:
    system_sub = p.add_subparsers(dest="system_command", required=True)
    q = system_sub.add_parser("probe", help="read this node (lscpu, /proc/meminfo, nvidia-smi or rocm-smi) into config/systems/<name>.yaml")
    q.add_argument("--name", required=True, help="the system's name (submission.platform)")
    q.add_argument("--nodes", type=int, default=1, help="nodes of the system a run may span (every node like this one)")
    q.add_argument(
        "--nvlink-domain-nodes", type=int, default=1, help="nodes whose GPUs share one NVLink domain (18 on a GB200/GB300 NVL72 rack of 4-GPU nodes; default 1)"
    )
    q.add_argument("--out", type=Path, help="where to write it (default: config/systems/<name>.yaml)")


def _system(args: argparse.Namespace) -> int:
    from mlperf_wf.config import system

    print(system.probe_into(args.name, args.nodes, args.out, args.nvlink_domain_nodes))
    return 0


SYSTEM = Command(
    "system",
    help="the system under test: what its nodes have, for the plan and the submission's system JSON",
    add_arguments=_system_arguments,
    run=_system,
    people=True,
)

COMMANDS = (CHECK, CONFIG_FILES, SYSTEM)
"""The config's subcommands, in the order the help lists them."""
