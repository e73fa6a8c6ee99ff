"""The table of published results (:mod:`mlperf_wf.plan.published`) made from the mlcommons/training_results rounds:
each (system, benchmark) scored by the project's scorer as the result summarizer scores them
(``python -m mlperf_wf.results.published_rounds ROUND_FOLDER --round 5.1.0 --repo ... --commit ...``)."""

from __future__ import annotations

import csv
from pathlib import Path

from mlperf_wf.config import registry
from mlperf_wf.plan.published import TABLE, PublishedResult, _data_file, family_of, read_rows


def folder_names() -> dict[str, str]:
    """Benchmark folder names of older rounds and the benchmark they are here (its definition's ``results_folder_names``)."""
    return {alias: name for name in registry.benchmark_names() for alias in registry.load_benchmark(name).results_folder_names}


def rows_of_round(round_folder: Path, ruleset: str, repo: str, commit: str, jobs: int | None = None) -> list[PublishedResult]:
    """The published results under a round's folder of organisations (or one organisation's), scored by the
    project's scorer as the result summarizer scores them; a set that is not valid is left out."""
    from mlperf_wf.results import scoring, verdict

    rows, aliases = [], folder_names()
    for score in scoring.score_paths(round_folder, ruleset, verdict.judged_score, jobs=jobs):
        if not score.valid or score.time_to_train is None:
            continue
        folder = Path(score.folder)
        organisation = folder.parents[2]
        desc = json_of(organisation / "systems" / f"{score.system}.json")
        accelerator = str(desc.get("accelerator_model_name", ""))
        count = int(desc.get("number_of_nodes", 1)) * int(desc.get("accelerators_per_node", 0) or 0)
        family = family_of(accelerator)
        if count < 1 or family is None:
            continue
        gbs = score.rcp.global_batch_size if score.rcp else None
        relative = folder.relative_to(organisation.parent).as_posix()
        rows.append(
            PublishedResult(
                benchmark=aliases.get(score.benchmark, score.benchmark),
                round=ruleset,
                submitter=organisation.name,
                system=score.system,
                accelerator=accelerator,
                family=family,
                accelerators=count,
                minutes=round(score.time_to_train, 3),
                global_batch_size=int(gbs) if gbs else None,
                source=f"https://github.com/{repo}/tree/{commit}/{relative}",
            )
        )
    return rows


def json_of(path: Path) -> dict:
    import json

    return json.loads(path.read_text()) if path.is_file() else {}


def write_table(rows: list[PublishedResult], path: Path) -> None:
    """Rows into the CSV, sorted by benchmark, family and count."""
    fields = list(PublishedResult.model_fields)
    ordered = sorted(rows, key=lambda r: (r.benchmark, r.family, r.accelerators, r.round, r.system))
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for row in ordered:
            writer.writerow({key: "" if value is None else value for key, value in row.model_dump().items()})


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="add a training_results round's scored results to published_results.csv")
    parser.add_argument("round_folder", type=Path, help="the round's folder of organisations (a checkout of mlcommons/training_results_vX.Y)")
    parser.add_argument("--round", required=True, help="its ruleset, e.g. 5.1.0")
    parser.add_argument("--repo", required=True, help="e.g. mlcommons/training_results_v5.1")
    parser.add_argument("--commit", required=True, help="the commit the folder is")
    parser.add_argument("--table", type=Path, default=Path(str(_data_file(TABLE))))
    args = parser.parse_args(argv)
    kept = [row for row in (read_rows(args.table.read_text()) if args.table.is_file() else ()) if row.round != args.round]
    write_table(kept + rows_of_round(args.round_folder, args.round, args.repo, args.commit), args.table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
