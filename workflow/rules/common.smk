# Input functions of the rules: thin wrappers over the plan (mlperf_wf.plan.plan), which holds
# every path, command and resource and is tested without Snakemake.
# Only cheap work here: this file is evaluated again inside every cluster job.

import atexit
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir).parent / "src"))

from mlperf_wf.plan import plan as planning  # noqa: E402
from mlperf_wf.plan import preflight  # noqa: E402
from mlperf_wf.plan.snakemake_functions import (
    hide_shell_commands,
    signature_once,
    wrap_long_lines,
)  # noqa: E402
from mlperf_wf.config.config_check import parsed_config  # noqa: E402
from mlperf_wf.errors import ConfigError  # noqa: E402
from mlperf_wf.results.snakemake_state import another_snakemake_in  # noqa: E402
from mlperf_wf.results import package as submission_package  # noqa: E402
from mlperf_wf.results import invocation  # noqa: E402
from mlperf_wf.results import report as benchmark_report  # noqa: E402
from mlperf_wf.results import front_page  # noqa: E402
from mlperf_wf.results import doom  # noqa: E402
from mlperf_wf.results import doomed_sets  # noqa: E402
from mlperf_wf.run import identity as campaign_identity  # noqa: E402

# A second Snakemake (a dry run too) in a folder where one runs fails on the first one's unfinished outputs; say why.
if workflow.is_main_process:
    _running = another_snakemake_in(Path.cwd())
    if _running is not None:
        raise WorkflowError(
            f"another Snakemake (pid {_running}) is running in {Path.cwd()}: wait for it to end "
            "(`mlperf-wf status` shows it), or stop it first"
        )

# One line for a bad config (Snakemake's validate prints the whole config); the typed model fills in
# the defaults (workflow/schemas/config.schema.yaml is generated from it).
try:
    WORKFLOW_CONFIG = parsed_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None
config.update(WORKFLOW_CONFIG.filled())


try:
    # a job step's definitions were checked by the main process that submitted it: not read again in every job
    PLAN = planning.load(
        WORKFLOW_CONFIG,
        project_root=Path(workflow.basedir).parent,
        check_definitions=workflow.is_main_process,
    )
except ConfigError as err:
    # at full scale with every other preflight problem at once (a ruleset a benchmark is not part of stops the plan)
    message = preflight.unloadable_config(
        config, Path(workflow.basedir).parent, Path.cwd(), err
    )
    raise WorkflowError(message) from None


def command_line_args():
    """The `snakemake` command line this process runs, as Snakemake's own parser reads it without profiles (the DAG
    settings are not there yet while the Snakefile is parsed); None when this is not such a command line.
    """
    from snakemake.cli import get_argument_parser

    try:
        return get_argument_parser().parse_known_args(sys.argv[1:])[0]
    except (SystemExit, Exception):
        return None


def command_line_targets():
    """The targets of the `snakemake` command line this process runs."""
    args = command_line_args()
    return (args.targets or []) if args is not None else []


# Whether this is a dry run (-n): Snakemake's own flag is set only once the DAG runs, after the Snakefile is parsed.
DRY_RUN = workflow.dryrun or bool(getattr(command_line_args(), "dryrun", False))

# A tiny run names each job in one line (the rules' `message`) and prints no shell command unless -p asks for one.
if not PLAN.shows_shell_commands(
    bool(getattr(command_line_args(), "printshellcmds", False))
):
    hide_shell_commands()
# A command printed (a full-scale train job's is thousands of characters) is wrapped, as are a job's long file lists.
wrap_long_lines()


# A target that names no benchmark (a typo) or the other scale's path is one line, not a MissingRuleException.
if workflow.is_main_process:
    _target_problem = PLAN.target_problem(command_line_targets())
    if _target_problem:
        raise WorkflowError(_target_problem)
    # What must stop the invocation before its preflight (at tiny scale: a platform with no system description).
    for _problem in preflight.problems_before_any_job(PLAN):
        raise WorkflowError(str(_problem))
    # A report whose power logs changed since it read them (another campaign's copied in, one removed) is made again,
    # so that it judges the logs `mlperf-wf score` reads: their digests are written to a record the report rule reads
    # (Snakemake follows its inputs only, and does not remake a missing report whose consumers are up to date).
    for _name in config["benchmarks"]:
        _report_file = Path(PLAN.workdir) / PLAN.of(_name).report()
        if DRY_RUN:
            _report_changed = benchmark_report.changed_since_made(_report_file)
        else:
            _report_changed = benchmark_report.record_changed_power_logs(_report_file)
        if _report_changed:
            _would = "would report again" if DRY_RUN else "reporting again"
            print(f"mlperf-wf: {_report_changed}: {_would}", file=sys.stderr)
    # A package whose files changed since its check (edited, removed, added) is made and checked again: what changed
    # is written to a record the package rule reads, newer than the check (a dry run only says so). Removing the check
    # would not do: Snakemake does not remake a missing output whose consumers (the summary) are up to date.
    for _package_check in sorted(
        (Path(PLAN.results_root) / "submission").glob("*/package_check.json")
    ):
        if DRY_RUN:
            _package_changed = submission_package.changed_since_checked(_package_check)
        else:
            _package_changed = submission_package.record_change(_package_check)
        if _package_changed:
            _would = (
                "would package again (a dry run changes nothing)"
                if DRY_RUN
                else "packaging again"
            )
            print(f"mlperf-wf: {_package_changed}: {_would}", file=sys.stderr)

# With stop_when_doomed, a benchmark whose set can no longer be valid (the verdict of status and the train jobs' gate):
# none of its runs not started is made, and its report is written from its finished runs.
STOPPED = doomed_sets.stopped_sets(PLAN, Path.cwd()) if workflow.is_main_process else {}
for _name, _doomed in STOPPED.items():
    print(f"mlperf-wf: {doom.stopped_note(PLAN, _name, _doomed)}", file=sys.stderr)

# The report's front page (report/workflow.rst) says each benchmark's round and division as its runs are checked, not
# the config's "latest" and a division the tiny tier may not use.
config["rounds_checked"] = PLAN.rounds_in_words()
# ... and leads with each benchmark's result, in words (mlperf_wf.results.front_page): the report opens on it. Only the
# main process writes the report; a job's own parse of this file (on a cluster node) need not read every report.
config["results_in_words"] = (
    front_page.rst(
        PLAN.workdir,
        [PLAN.of(_name).report() for _name in config["benchmarks"]]
        + PLAN.finished_reports(),
    )
    if workflow.is_main_process
    else ""
)

SCALE = PLAN.scale
RESULTS = PLAN.results_root
LOGS = PLAN.logs_root

# A benchmark whose campaign identity (its resolved config, hyperparameters, image) changed since it was recorded: the
# record is made again, so its report is remade and refuses by name the runs made with the old one (they are not
# retrained on their own: the profiles rerun on newer inputs only).
if workflow.is_main_process:
    for _name in config["benchmarks"]:
        _identity_file = Path(RESULTS) / _name / campaign_identity.IDENTITY_FILE
        _identity = campaign_identity.expected(PLAN, _name)
        if campaign_identity.changed(_identity_file, _identity):
            _would = (
                "would record it again (a dry run changes nothing)"
                if DRY_RUN
                else "recording it again; runs made with the old one are refused"
            )
            print(
                f"mlperf-wf: {_identity_file}: {_name}'s config changed since its runs' identity was recorded: {_would}",
                file=sys.stderr,
            )
            # written anew, newer than the report that reads it (a removed one would not be made again while the
            # report is up to date)
            if not DRY_RUN:
                campaign_identity.write_expected(_identity, _identity_file)


# ---- preflight (mlperf_wf.plan.preflight) ----
# At full scale every problem of what this invocation plans is found before anything is queued: a dry run renders the
# whole plan and ends with the problems as one warning block; a real run refuses in `onstart` (after the DAG is built,
# before any job is submitted), one line per problem. Only in the main process: jobs re-read this file on their nodes.
PREFLIGHT = preflight.tracker(PLAN, workflow.is_main_process)


def jobs_to_run():
    """(rule, wildcards) of every job the DAG will run; None before the DAG is built."""
    dag = workflow.dag
    if dag is None:
        return None
    return [(job.rule.name, dict(job.wildcards_dict)) for job in dag.needrun_jobs()]


def refuse_preflight_problems():
    """`onstart` of a real full-scale run: stop before any job is submitted when the preflight finds problems."""
    if PREFLIGHT is None:
        return
    PREFLIGHT.reported = True
    problems, what = PREFLIGHT.problems(jobs_to_run())
    if problems:
        raise WorkflowError(
            preflight.describe(problems, what)
            + "\nNo job was submitted; `snakemake -n ...` shows the plan, `mlperf-wf preflight` these checks."
        )


def record_invocation():
    """`onstart`: what this invocation runs (its --config values, its jobs' benchmarks), which `mlperf-wf status`
    with no arguments follows."""
    named = {job.wildcards_dict.get("benchmark") for job in workflow.dag.jobs}
    order = [*config["benchmarks"], *sorted(PLAN.benchmarks)]
    invocation.record(
        Path.cwd(),
        dict(workflow.config_settings.overwrite_config),
        [name for name in dict.fromkeys(order) if name in named],
    )


def warn_preflight_problems():
    """At exit of a full-scale invocation that did not run (a dry run, nothing to do, or a DAG that failed): the
    preflight problems of what it planned, as one warning block."""
    if PREFLIGHT is None or PREFLIGHT.reported:
        return
    jobs = jobs_to_run()
    problems, what = PREFLIGHT.problems(jobs or None)
    planned = PREFLIGHT.planned_benchmarks(jobs or None)
    for table in (
        preflight.batch_tables(PLAN, planned),
        preflight.time_tables(PLAN, planned),
        preflight.launch_tables(PLAN, planned),
    ):
        if table:
            print(f"\n{table}", file=sys.stderr)
    closing = PREFLIGHT.closing(problems, what)
    if closing:
        print(closing, file=sys.stderr)


atexit.register(warn_preflight_problems)

# A full-scale dry run lists the problems first, before Snakemake lists its jobs.
if PREFLIGHT is not None and DRY_RUN:
    _early = PREFLIGHT.show_early(command_line_targets())
    if _early:
        print(f"{_early}\n", file=sys.stderr, flush=True)


wildcard_constraints:
    benchmark="|".join(PLAN.benchmarks),
    scale=SCALE,
    shard=r"[A-Za-z0-9_.-]+",
    run=r"\d+",
    ruleset=r"\d+\.\d+\.\d+",
    division="closed|open",


# ---- download ----


@signature_once
def download_inputs(wildcards):
    """The generated mirror at tiny scale; nothing at full scale."""
    if PREFLIGHT:
        PREFLIGHT.saw_dataset(wildcards.dataset)
    return PLAN.download_inputs(wildcards.dataset)


@signature_once
def download_source_args(wildcards):
    """`--uri/--md5` of the dataset at this scale."""
    return PLAN.download_source_args(wildcards.dataset)


# ---- preprocess ----


@signature_once
def preprocess_inputs(wildcards):
    """Every dataset the shard reads, by role, its verification record, and the earlier shards it reads."""
    return PLAN.of(wildcards.benchmark).preprocess_inputs(wildcards.shard)


@signature_once
def preprocess_role_args(wildcards):
    """`--input role=folder` arguments of the preprocess command, and `--preparation` when not the default."""
    return PLAN.of(wildcards.benchmark).preprocess_args(wildcards.shard)


@signature_once
def preparation_args(wildcards):
    """`--preparation NAME` when the config picks a preparation other than the benchmark's default."""
    return PLAN.of(wildcards.benchmark).preparation_args()


@signature_once
def preprocess_shards(wildcards):
    """Every shard folder of the benchmark, the inputs of its dataset tree."""
    return PLAN.of(wildcards.benchmark).shard_dirs()


def shard_resource(name):
    """Input function giving resource `name` of a preprocess_shard job."""

    @signature_once
    def resource(wildcards):
        return PLAN.of(wildcards.benchmark).shard_resources(wildcards.shard)[name]

    return resource


# ---- train ----


@signature_once
def train_inputs(wildcards):
    """The prepared tree and every dataset the runs read directly."""
    if PREFLIGHT:
        PREFLIGHT.saw_benchmark(wildcards.benchmark)
    return PLAN.of(wildcards.benchmark).train_inputs()


def planned_or_failing(plan_job, benchmark, failing=planning.unplannable_job):
    """`plan_job()`, a job of `benchmark`'s image; where the config cannot make it (a geometry its launcher refuses), in
    the main process a job that only fails (`failing(problem)`), so the DAG renders and the preflight lists the problem
    with every other one (a real run refuses before submitting anything); inside a job, the one-line error.
    """
    try:
        return plan_job()
    except ConfigError as err:
        if PREFLIGHT is None:
            raise WorkflowError(str(err)) from None
        PREFLIGHT.saw_benchmark(benchmark)
        return failing(str(err), PLAN.scale)


def planned_train_job(wildcards):
    """The run's plan (or a job that only fails: `planned_or_failing`)."""
    return planned_or_failing(
        lambda: PLAN.of(wildcards.benchmark).train_job(int(wildcards.run)),
        wildcards.benchmark,
    )


@signature_once
def train_spec(wildcards):
    """The run's job spec (JSON) that the train job writes and runs (or one that only fails: `planned_or_failing`)."""
    spec = planned_or_failing(
        lambda: PLAN.of(wildcards.benchmark).train_spec(int(wildcards.run)),
        wildcards.benchmark,
        planning.unplannable_spec,
    )
    return spec.model_dump_json()


def job_field(planned_job, name):
    """Input function giving field `name` (command, launcher, image, threads) of the job `planned_job(wildcards)`."""

    @signature_once
    def field(wildcards):
        return getattr(planned_job(wildcards), name)

    return field


def job_resource(planned_job, name):
    """Input function giving scheduler resource `name` of the job `planned_job(wildcards)`."""

    @signature_once
    def resource(wildcards):
        return getattr(planned_job(wildcards).resources, name)

    return resource


def train_field(name):
    """Field `name` of the run's plan."""
    return job_field(planned_train_job, name)


def train_resource(name):
    """Scheduler resource `name` of the run's plan."""
    return job_resource(planned_train_job, name)


# ---- the rehearsal of a benchmark's full-scale job (rules/rehearse.smk) ----


def planned_rehearsal_job(wildcards):
    """The rehearsal's plan (or a job that only fails: `planned_or_failing`)."""
    return planned_or_failing(
        lambda: PLAN.of(wildcards.benchmark).rehearsal_job(int(wildcards.steps)),
        wildcards.benchmark,
    )


def rehearsal_slurm_extra(wildcards, attempt):
    """The train jobs' sbatch flags, and none of the nodes the rehearsal's own node check named (read for a retry)."""
    return PLAN.of(wildcards.benchmark).train_slurm_extra(rehearsal=True)


# ---- inputs a benchmark's own image makes (full.made_in_image) ----

# The datasets make_in_image makes at this scale (none at tiny scale: a regex that matches nothing).
MADE_IN_IMAGE = "|".join(PLAN.made_in_image) or "(?!)"


def planned_image_job(wildcards):
    """The one-off job of a benchmark's image that makes the dataset (or a job that only fails: `planned_or_failing`)."""
    return planned_or_failing(
        lambda: PLAN.image_job(wildcards.dataset),
        PLAN.made_in_image_of(wildcards.dataset)[0],
    )


@signature_once
def image_job_spec(wildcards):
    """The one-off job's spec (JSON) that the job writes and runs (or one that only fails: `planned_or_failing`)."""
    spec = planned_or_failing(
        lambda: PLAN.image_job_spec(wildcards.dataset),
        PLAN.made_in_image_of(wildcards.dataset)[0],
        planning.unplannable_spec,
    )
    return spec.model_dump_json()


@signature_once
def image_job_inputs(wildcards):
    """What the one-off job reads: the runs' inputs but the one it makes; only a newer input it is made from (the
    checkpoint a conversion converts) makes it again, the others are ancient (a re-prepared tree does not).
    """
    if PREFLIGHT:
        PREFLIGHT.saw_benchmark(PLAN.made_in_image_of(wildcards.dataset)[0])
    remade_by = PLAN.image_job_remade_by(wildcards.dataset)
    inputs = PLAN.image_job_inputs(wildcards.dataset)
    return {
        key: path if key in remade_by else ancient(path) for key, path in inputs.items()
    }


def image_job_field(name):
    """Field `name` of the one-off job's plan."""
    return job_field(planned_image_job, name)


def image_job_resource(name):
    """Scheduler resource `name` of the one-off job's plan."""
    return job_resource(planned_image_job, name)


@signature_once
def train_slurm_extra(wildcards, attempt):
    """A full-scale job's extra sbatch flags: whole nodes, whole NVLink segments where its benchmark needs them, none
    a node check named (read again for a retry). The one-off job of an image is its benchmark's.
    """
    name = (
        wildcards.benchmark
        if "benchmark" in wildcards.keys()
        else PLAN.made_in_image_of(wildcards.dataset)[0]
    )
    return PLAN.of(name).train_slurm_extra()


def record_campaign_config():
    """`onstart`: the config the train jobs' campaign gate reads (only with stop_when_doomed)."""
    if PLAN.settings.stop_when_doomed and workflow.is_main_process:
        from mlperf_wf.results import doom

        doom.record_config(WORKFLOW_CONFIG.filled(), PLAN.campaign_config_record())


@signature_once
def expected_identity(wildcards):
    """The campaign identity the benchmark's runs must share, as the config makes it now (JSON)."""
    return campaign_identity.expected(PLAN, wildcards.benchmark).model_dump_json()


@signature_once
def wildcard_ruleset(wildcards):
    """Ruleset of the job's benchmark."""
    return PLAN.of(wildcards.benchmark).ruleset()


@signature_once
def wildcard_division(wildcards):
    """Division of the job's benchmark (its tiny tier may be open)."""
    return PLAN.of(wildcards.benchmark).division()


@signature_once
def wildcard_seed(wildcards):
    """Seed the job's run was started with."""
    return PLAN.seed(int(wildcards.run))


# ---- report ----


def run_files(file):
    """Input function giving `file` of every run of the job's benchmark."""

    @signature_once
    def files(wildcards):
        return made_run_files(wildcards.benchmark, file)

    return files


def made_run_files(name, file):
    """`file` of every run of benchmark `name` the workflow makes (a doomed set's runs not started are not made)."""
    return [
        PLAN.of(name).run_file(run, file)
        for run in doom.runs_to_make(PLAN, name, STOPPED)
    ]


@signature_once
def doomed_args(wildcards):
    """`--doomed RECORD` for the report of a set that can no longer be valid, whose runs not started were not made."""
    return doom.report_args(wildcards.benchmark, STOPPED)


def say_doomed_reports():
    """`onerror`: for a set the train jobs' gate stopped, the command that writes its report."""
    if PLAN.settings.stop_when_doomed and workflow.is_main_process:
        for line in doomed_sets.report_next_lines(
            PLAN, Path.cwd(), sys.argv, command_line_targets()
        ):
            print(line, file=sys.stderr)


def existing(path):
    """``[path]`` where the file is there, else ``[]``: an input the workflow writes only when something changed."""
    return [str(path)] if Path(path).is_file() else []


@signature_once
def package_change_record(wildcards):
    """What changed in the package since its check, where the workflow found it changed (it is made again)."""
    return existing(
        Path(RESULTS)
        / "submission"
        / f"{wildcards.ruleset}-{wildcards.division}"
        / submission_package.CHANGE_RECORD
    )


@signature_once
def power_record(wildcards):
    """The digests of the runs' power logs, where the workflow found them changed since the report read them."""
    return existing(
        Path(PLAN.of(wildcards.benchmark).report()).parent
        / benchmark_report.POWER_RECORD
    )


def report_args(wildcards, input):
    """`--result` / `--compliance` / `--provenance` of each run, for the report command."""
    return " ".join(
        f"--result {result} --compliance {verdict} --provenance {made_with}"
        for result, verdict, made_with in zip(
            input.results, input.verdicts, input.provenance
        )
    )


@signature_once
def reference_logs_args(wildcards):
    """``--reference-logs FOLDER`` where the config's reference_logs names one for the benchmark."""
    return PLAN.of(wildcards.benchmark).reference_logs_args()


def all_reports():
    """Report of every configured benchmark."""
    return [PLAN.of(name).report() for name in config["benchmarks"]]


def package_group(wildcards):
    """(reports this invocation makes, finished reports) of the package's round and division."""
    try:
        return PLAN.package_group(f"{wildcards.ruleset}-{wildcards.division}")
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


@signature_once
def package_reports(wildcards):
    """The package's reports that this invocation makes (its inputs)."""
    return package_group(wildcards)[0]


@signature_once
def package_finished(wildcards):
    """The package's reports of benchmarks finished earlier (read as they are, not made again)."""
    return package_group(wildcards)[1]


@signature_once
def package_finished_digests(wildcards):
    """Their digests: one made again makes the package again."""
    return PLAN.finished_digests(package_group(wildcards)[1])


def all_package_checks():
    """The check of every package: one per round and division of the configured and finished benchmarks."""
    return [PLAN.package_check(group) for group in PLAN.package_groups()]


@signature_once
def summary_finished_digests(wildcards):
    """Digests of the finished reports the summary reads."""
    return PLAN.finished_digests(PLAN.finished_reports())


@signature_once
def package_check_args(wildcards, input):
    """``--package-check`` of each package, for the summary command."""
    return " ".join(f"--package-check {check}" for check in input.package)


def all_targets():
    """Every configured benchmark's report, figures, run logs and compliance verdicts.

    The run files are targets too, not only the report's inputs: Snakemake
    does not rebuild a deleted intermediate file while the files made from it
    are up to date, and a user who deletes a run's log wants that run redone.
    """
    targets = [f"{RESULTS}/summary.csv"]
    for name in config["benchmarks"]:
        targets += expand(
            f"{RESULTS}/{name}/{{file}}",
            file=[
                "report.json",
                "overview.html",
                "plots/time_to_train.png",
                "plots/convergence.png",
            ],
        )
        targets += made_run_files(name, "result.txt")
        targets += made_run_files(name, "compliance.json")
    return targets
