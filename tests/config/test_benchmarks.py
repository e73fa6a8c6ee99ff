"""The contract every discovered benchmark folder keeps, and the checks that guard it.

Parametrized over ``registry.benchmark_names()``: a new folder is tested without touching this file.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.acquire import prepare
from mlperf_wf.cli import main
from mlperf_wf.config import docstrings, hyperparameters, mlperf_rules, registry
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import launch
from mlperf_wf.run.harness import TinyRun
from tests.conftest import REFERENCE_COMMIT, reference_source
from tests.mllogs import tiny_run_spec
from tests.plan import launch_line

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = registry.benchmark_names()


def test_benchmarks_are_discovered_from_their_folders():
    assert BENCHMARKS == sorted(p.parent.name for p in (ROOT / "src/mlperf_wf/benchmarks").glob("*/benchmark.yaml"))
    assert {"llama2_70b_lora", "rgat"} <= set(BENCHMARKS)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_definition_loads_with_its_modules(name):
    bench = registry.check_benchmark(name, ROOT, import_modules=True)
    assert (bench.folder / "README.md").is_file(), "every benchmark folder explains itself"
    for way in bench.preparation_names():
        for scale in ("tiny", "full"):
            shards = prepare.shard_names(bench, scale, way)
            layout = prepare.module(bench, way).layout(scale)
            assert shards and layout
            assert {target.split("/", 1)[0] for target in layout.values()} <= set(shards), "the tree links only into declared shards"
            for shard in shards:
                prepare.shard_inputs(bench, shard, scale, way)  # each reads only shards listed before it
        assert set(layout) == set(prepare.module(bench).layout("full")), "every preparation gives the runs the same tree"


@pytest.mark.parametrize("name", BENCHMARKS)
def test_rulesets_come_from_mlperf_logging(name):
    bench = registry.load_benchmark(name)
    rounds = mlperf_rules.rulesets_of(bench.submission_benchmark)
    assert "rulesets" not in (bench.folder / "benchmark.yaml").read_text()
    for ruleset in rounds:
        mlperf_rules.quality_targets(bench.submission_benchmark, ruleset)
    assert mlperf_rules.required_runs(bench.submission_benchmark) >= 1


@pytest.mark.parametrize("name", BENCHMARKS)
def test_roles_resolve_to_catalog_datasets_with_a_tiny_generator(name):
    bench = registry.load_benchmark(name)
    for item in [*bench.inputs.values(), *(item for way in bench.preparations.values() for item in way.inputs.values())]:
        dataset = registry.check_dataset(item.dataset, ROOT, import_modules=True)
        assert dataset.tiny is not None, f"{item.dataset} has no tiny stand-in, so {name} has no tiny tier"
        assert name in registry.users_of(item.dataset)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_tiny_hyperparameters_validate_and_cover_every_key_each_round_requires(name, tmp_path):
    """The typed model's mllog() plus the harness's preamble and the trainer's run.config() hold every key the rules require."""
    bench = registry.load_benchmark(name)
    hp = hyperparameters.resolve(bench, {})
    logged = set(hp.mllog(world_size=1))
    assert logged, "the model logs its hyperparameters"
    documented = docstrings.field_docstrings(type(hp))
    assert all(documented.get(name) for name in type(hp).model_fields), "every hyperparameter has a docstring"
    for ruleset in mlperf_rules.rulesets_of(bench.submission_benchmark):
        spec = tiny_run_spec(name, ruleset, tmp_path / f"{ruleset}.txt", tmp_path)
        with TinyRun(spec, hp) as run:
            from_model = ("parallelism", "precision", "weights_initialization")
            run_config = {key for key in mlperf_rules.required_keys(bench.submission_benchmark, ruleset) if any(part in key for part in from_model)}
            run.config(dict.fromkeys(run_config, 1))  # what the trainer adds from its model (numerics, sharding, initialised tensors)
            run.begin()
            run.finish("aborted")


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.parametrize("launcher", launch.LAUNCHERS)
def test_full_scale_plan_renders_for_every_launcher(name, launcher, tmp_path):
    bench = registry.load_benchmark(name)
    paths = launch.RunPaths(
        prepared=tmp_path / "prepared" / "dataset",
        result_file=tmp_path / "runs" / "0" / "result.txt",
        inputs={role: tmp_path / role for role in bench.roles_for("train")},
    )
    split = bench.full.geometry.node_split
    if split and launcher != "pyxis":  # roles that never share a node: more than one node, which only pyxis launches
        with pytest.raises(ConfigError, match="nodes need the pyxis launcher"):
            launch_line.full_scale(bench, 0, 1234, paths, launch.Launch(launcher, nodes=split.train + split.generation))
        return
    line = launch_line.full_scale(bench, 0, 1234, paths, launch.Launch(launcher, nodes=split.train + split.generation if split else 1))
    assert "1234" in line and "{" + "seed}" not in line


def invocations_of(command: list[str]) -> list[list[str]]:
    """The command's program invocations: the command itself, or each Python invocation of a ``bash -c`` script
    (bert runs the reference's training and evaluation processes side by side, and the shell that watches both)."""
    if command[:2] != ["bash", "-c"]:
        return [command]
    words = shlex.split(command[2].replace("&", " & ").replace(";", " ; "))
    out: list[list[str]] = [[]]
    for word in words:
        if word in ("&", ";"):
            out.append([])
        elif word != "wait":
            out[-1].append(word)
    return [words for words in out if any(word.endswith(".py") for word in words)]


def declares(source: str, option: str) -> bool:
    """Whether a script defines ``--option``: argparse (also by an unambiguous prefix) or absl (``--nofoo`` negates ``foo``)."""
    if re.search(rf"""['"]--{re.escape(option)}\w*['"]""", source) or re.search(rf"^\s+{re.escape(option)}\w*\s*:", source, re.M):
        return True
    absl = set(re.findall(r"DEFINE_\w+\(\s*['\"](\w+)['\"]", source))
    return option in absl or (option.startswith("no") and option[2:] in absl)


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_the_full_command_names_files_and_flags_the_reference_has(name):
    """Every script and config file the full-scale command names exists in the reference tree at the pinned
    commit, and every flag given to the script is one its argument parser defines (argparse also takes an
    unambiguous prefix, as llama2's `--max_seq_len` for `max_seq_length`; absl flags may be defined in the
    modules the script imports from its folder; a script whose parser lives in its package (gpt3's
    pretrain_gpt.py, megatron/arguments.py) is checked against the reference folder's sources)."""
    bench = registry.load_benchmark(name)
    folder = reference_source(bench.reference.path)
    if folder is None or not bench.reference.commit.startswith(REFERENCE_COMMIT):
        pytest.skip(f"the reference source of {name} at {bench.reference.commit[:7]} is not on this machine")
    submodule = bench.reference.submodule
    if submodule is not None:
        if not (folder / submodule.path).is_dir() or not any((folder / submodule.path).iterdir()):
            pytest.skip(
                f"{name}: the command's files are in the submodule {submodule.path} ({submodule.repository} at {submodule.commit[:12]}), not in this copy"
            )
        folder = folder / submodule.path
    for command in invocations_of(bench.full.command):
        files = [word for word in command if word.endswith((".py", ".yaml", ".yml", ".json", ".sh")) and not word.startswith(("/", "{", "-"))]
        assert files, f"{name}: the command names no script"
        for relative in files:
            assert (folder / relative).is_file(), f"{name}: {relative} is not in {folder}"
        script = next((word for word in command if word.endswith(".py")), None)
        if script is None:  # a shell script the reference runs as it is (gpt_oss_20b's run_and_time.sh): no flags to check
            assert not [word for word in command if word.startswith("--")], f"{name}: flags given to a shell script"
            continue
        source = (folder / script).read_text()
        if "absl" in source:  # absl flags live in every module of the folder the script imports (bert: optimization.py)
            source = "\n".join(path.read_text() for path in sorted(folder.glob("*.py")))
        elif "add_argument" not in source and "argparse" not in source:  # the parser is in the script's package (gpt3)
            source = "\n".join(path.read_text(errors="replace") for path in sorted(folder.rglob("*.py")))
        for flag in (word for word in command[command.index(script) + 1 :] if word.startswith("--")):
            option = flag[2:].partition("=")[0]
            assert declares(source, option), f"{name}: {script} defines no option {flag}"


def test_a_trainer_that_forgets_a_required_key_is_refused_before_the_clock_starts(tmp_path):
    bench = registry.load_benchmark("llama2_70b_lora")
    spec = tiny_run_spec("llama2_70b_lora", "6.1.0", tmp_path / "result.txt", tmp_path, target=0.925)
    hp = hyperparameters.resolve(bench, {})
    with pytest.raises(ConfigError, match=r"ruleset 6\.1\.0 \(closed\) requires context_parallelism, expert_parallelism, lowest_numerical_precision_in_attn"):
        with TinyRun(spec, hp) as run:
            run.begin()
    assert "run_start" not in (tmp_path / "result.txt").read_text()


def test_a_run_that_dies_still_ends_its_log(tmp_path):
    bench = registry.load_benchmark("rgat")
    spec = tiny_run_spec("rgat", "5.1.0", tmp_path / "result.txt", tmp_path, target=0.72)
    with pytest.raises(FileNotFoundError):
        with TinyRun(spec, hyperparameters.resolve(bench, {})) as run:
            run.begin()
            (tmp_path / "missing").read_text()
    keys = [json.loads(line.removeprefix(":::MLLOG "))["key"] for line in (tmp_path / "result.txt").read_text().splitlines()]
    assert keys[-1] == "run_stop"


def test_check_command_validates_every_definition(capsys):
    assert main(["--root", str(ROOT), "check", "--import-modules"]) == 0
    assert "definitions valid" in capsys.readouterr().out


@pytest.fixture
def broken_project(tmp_path) -> Path:
    """A copy of the project (workflow, package, config) whose rgat definition has a mistyped key."""
    project = tmp_path / "project"
    for part in ("workflow", "src", "config"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    definition = project / "src/mlperf_wf/benchmarks/rgat/benchmark.yaml"
    definition.write_text(definition.read_text().replace("gpus_per_node: 8 ", "gpus_per_node: eight "))
    return project


def test_a_broken_definition_names_itself_in_check_and_in_a_dry_run(broken_project):
    env = {"PYTHONPATH": str(broken_project / "src"), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    check = subprocess.run([sys.executable, "-m", "mlperf_wf", "check"], cwd=broken_project, env=env, capture_output=True, text=True, check=False)
    assert check.returncode == 2
    lines = check.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "benchmarks/rgat/benchmark.yaml: full.geometry.gpus_per_node: Input should be a valid integer, unable to parse string as an integer (got 'eight')"
        in lines[0]
    ), check.stderr
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(broken_project / "workflow/Snakefile"), "-n", "results/tiny/llama2_70b_lora/report.json"],
        cwd=broken_project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert dry.returncode != 0
    output = dry.stdout + dry.stderr
    assert (
        "benchmarks/rgat/benchmark.yaml: full.geometry.gpus_per_node: Input should be a valid integer, unable to parse string as an integer (got 'eight')"
        in output
    )
    assert "Traceback" not in output


def test_rule_files_name_no_benchmark():
    """Rules and their input functions are benchmark-agnostic: a benchmark never needs a rule-file line."""
    for path in (ROOT / "workflow" / "rules").glob("*.smk"):
        text = path.read_text()
        for name in BENCHMARKS:
            assert name not in text, f"{path.name} names {name}"


def _project_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The workflow, package and config copied, and an environment that imports the package from the copy."""
    project = tmp_path / "project"
    for part in ("workflow", "src", "config"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return project, {"PYTHONPATH": str(project / "src"), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


def _check(project: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlperf_wf", "check", *flags], cwd=project, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_a_benchmark_is_only_its_own_files(tmp_path, name):
    """Take one benchmark's folder away (its catalog entries are in it): every other definition still checks, every
    import of every remaining benchmark module resolves, and the workflow still plans all the others, so nothing
    outside that folder knows it."""
    project, env = _project_copy(tmp_path)
    only_its_own = sorted(path.stem for path in (project / "src/mlperf_wf/benchmarks" / name / registry.CATALOG_FOLDER).glob("*.yaml"))
    shutil.rmtree(project / "src/mlperf_wf/benchmarks" / name)
    check = _check(project, env)  # reads every import of every module from its source
    datasets = len(registry.dataset_ids(ROOT)) - len(only_its_own)
    assert check.returncode == 0 and f"{len(BENCHMARKS) - 1} benchmarks and {datasets} datasets" in check.stdout, check.stderr
    others = [other for other in BENCHMARKS if other != name]
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(project / "workflow/Snakefile"), "-n", "--config", "runs=1", f"benchmarks=[{','.join(others)}]"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr[-2000:]
    assert all(f"results/tiny/{other}/report.json" in dry.stdout for other in others)


def test_a_benchmark_that_imports_another_or_a_missing_module_is_one_line_of_check(tmp_path):
    """Read from the source, without importing torch: another benchmark's module, or a module of the package that
    is not there, is one line naming the file and line; with --import-modules a third-party import that fails is
    one line naming the file, not a traceback."""
    project, env = _project_copy(tmp_path)
    trainer = project / "src/mlperf_wf/benchmarks/gpt_oss_20b/trainer.py"
    original = trainer.read_text()
    head, rest = original.split("from __future__ import annotations\n")
    line = head.count("\n") + 2

    def trainer_importing(statement: str) -> str:
        return f"{head}from __future__ import annotations\n{statement}\n{rest}"

    trainer.write_text(trainer_importing("from mlperf_wf.benchmarks.llama31_8b import trainer as borrowed"))
    check = _check(project, env)
    assert check.returncode == 2 and check.stderr.count("\n") == 1, check.stderr
    assert f"{trainer}:{line}: imports mlperf_wf.benchmarks.llama31_8b, another benchmark's module" in check.stderr
    trainer.write_text(trainer_importing("from mlperf_wf.language_models import no_such_module"))
    check = _check(project, env)
    assert check.returncode == 2 and check.stderr.strip() == (
        f"mlperf-wf: error: {trainer}: line {line}: import: mlperf_wf.language_models has no 'no_such_module'"
    )
    trainer.write_text(trainer_importing("import mlperf_wf.no_such_module"))
    check = _check(project, env)
    assert check.stderr.strip() == f"mlperf-wf: error: {trainer}: line {line}: import: module 'mlperf_wf.no_such_module' does not exist"
    trainer.write_text(trainer_importing("import no_such_third_party_package"))
    assert _check(project, env).returncode == 0  # not read without --import-modules: a site may lack a trainer's packages
    check = _check(project, env, "--import-modules")
    assert check.returncode == 2 and check.stderr.strip() == (
        f"mlperf-wf: error: {trainer}: import failed: ModuleNotFoundError: No module named 'no_such_third_party_package'"
    )


def test_an_input_made_in_the_image_is_a_run_role_and_its_replaced_words_are_the_command_s():
    """``full.made_in_image``: only a role the runs read (the one-off job writes the folder they mount), made from other
    roles of the runs, and each replaced word a word of the command (a misspelt one would leave the job running the
    whole run)."""
    definition = registry.load_benchmark("qwen35_397b_grpo").model_dump()
    made = definition["full"]["made_in_image"]
    made["data"] = made.pop("megatron_checkpoint")
    allowed = r"allowed: \['checkpoint', 'megatron_checkpoint', 'task_images'\]"
    with pytest.raises(ValueError, match=rf"full.made_in_image: 'data' is not an input role the runs read; {allowed}"):
        registry.BenchmarkDef.model_validate(definition)
    made["megatron_checkpoint"] = made.pop("data")
    made["megatron_checkpoint"]["made_from"] = ["megatron_checkpoint"]
    with pytest.raises(ValueError, match=r"made_from: 'megatron_checkpoint' is not another input role of the runs; allowed: \['checkpoint', 'task_images'\]"):
        registry.BenchmarkDef.model_validate(definition)
    made["megatron_checkpoint"]["made_from"] = ["checkpoint"]
    made["megatron_checkpoint"]["replace_words"] = {"++grpo.max_num_steps=300": "++grpo.max_num_steps=1"}
    with pytest.raises(ValueError, match=r"replace_words: '\+\+grpo.max_num_steps=300' is not a word of full.command"):
        registry.BenchmarkDef.model_validate(definition)


def test_a_role_and_its_catalog_entry_agree_on_who_makes_the_dataset(tmp_path):
    """One line of `mlperf-wf check` where the definition says the image makes a role and its catalog entry says it is
    published (or the other way round), naming the definition, the role and both sides."""
    project, env = _project_copy(tmp_path)
    entry = project / "src/mlperf_wf/benchmarks/qwen35_397b_grpo/datasets/qwen35_397b_megatron_checkpoint.yaml"
    made, external = "  protocol: made_in_image\n  made_by: qwen35_397b_grpo\n", "  protocol: external\n  instructions: convert it\n"
    entry.write_text(entry.read_text().replace(made, external))
    check = _check(project, env)
    assert check.returncode == 2 and check.stderr.count("\n") == 1, check.stderr
    assert (
        "qwen35_397b_grpo/benchmark.yaml: inputs.megatron_checkpoint: dataset 'qwen35_397b_megatron_checkpoint' is protocol external; "
        "a role the benchmark's own image makes is in full.made_in_image and its catalog entry says protocol made_in_image, made_by qwen35_397b_grpo"
    ) in check.stderr
    entry.write_text(entry.read_text().replace(external, "  protocol: made_in_image\n  made_by: rgat\n"))
    check = _check(project, env)
    assert check.returncode == 2 and "made_by: 'rgat' makes no dataset 'qwen35_397b_megatron_checkpoint'" in check.stderr, check.stderr


TARGET_NAME = re.compile(r"target", re.IGNORECASE)
NUMBER = re.compile(r"[0-9]*\.?[0-9]+(e-?[0-9]+)?")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_a_quality_target_the_reference_reads_comes_from_the_rules_not_a_literal(name):
    """A reference flag or variable that carries the quality target (``--target_eval_loss``, ``--target_log_ppl``,
    ``MLLOG_TARGET_EVAL_LOSS``) is ``{quality_target}``, which the plan fills from mlperf-logging's rules for the
    run's round and division; a number there would be a second source, silently wrong in another round."""
    bench = registry.load_benchmark(name)
    command = bench.full.command
    pairs = itertools.pairwise(command)
    literal_flags = [f"{flag} {value}" for flag, value in pairs if flag.startswith("-") and TARGET_NAME.search(flag) and NUMBER.fullmatch(value)]
    literal_env = [f"{key}={value}" for key, value in bench.full.env.items() if TARGET_NAME.search(key) and NUMBER.fullmatch(value)]
    assert literal_flags + literal_env == []


def test_a_benchmark_folder_s_catalog_entry_is_that_benchmark_s_alone(tmp_path):
    """An entry in a benchmark's ``datasets/`` that another benchmark reads, or an id two folders hold, is one line of
    `mlperf-wf check`: removing the folder must remove only what that benchmark alone used."""
    project, env = _project_copy(tmp_path)
    benchmarks = project / "src/mlperf_wf/benchmarks"
    shutil.copy(benchmarks / "gpt3/datasets/gpt2_bpe_vocabulary.yaml", benchmarks / "retinanet/datasets/gpt2_bpe_vocabulary.yaml")
    check = _check(project, env)
    assert check.returncode == 2 and "retinanet/datasets/gpt2_bpe_vocabulary.yaml: id: 'gpt2_bpe_vocabulary' is also" in check.stderr, check.stderr
    (benchmarks / "retinanet/datasets/gpt2_bpe_vocabulary.yaml").unlink()
    shared = project / "config/datasets/llama31_8b_tokenizer.yaml"
    (benchmarks / "llama31_8b/datasets").mkdir()
    shared.rename(benchmarks / "llama31_8b/datasets/llama31_8b_tokenizer.yaml")
    check = _check(project, env)
    assert check.returncode == 2, check.stderr
    assert "llama31_8b/datasets/llama31_8b_tokenizer.yaml: id: 'llama31_8b_tokenizer' is read by deepseekv3_671b, gpt_oss_20b too" in check.stderr
