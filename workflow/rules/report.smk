# Report: per-run time to train, samples to converge, compliance, and the olympic score.


localrules:
    campaign_identity,
    report,
    plot_benchmark,
    summarize,
    package,


# The identity every run of the set must share (mlperf_wf.results.identity); made again when the config changes it.
rule campaign_identity:
    output:
        identity=f"{RESULTS}/{{benchmark}}/identity.json",
    log:
        f"{LOGS}/campaign_identity/{{benchmark}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        identity=expected_identity,
    shell:
        "mlperf-wf identity --json {params.identity:q} --out {output.identity} > {log} 2>&1"


rule report:
    input:
        results=run_files("result.txt"),
        verdicts=run_files("compliance.json"),
        provenance=run_files("provenance.json"),
        identity=rules.campaign_identity.output.identity,
    output:
        report=f"{RESULTS}/{{benchmark}}/report.json",
    log:
        f"{LOGS}/report/{{benchmark}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        benchmark="{benchmark}",
        ruleset=wildcard_ruleset,
        division=wildcard_division,
        scale=SCALE,
        platform=config["submission"]["platform"],
        runs=report_args,
    shell:
        "mlperf-wf report --benchmark {params.benchmark} --ruleset {params.ruleset}"
        " --division {params.division} --scale {params.scale}"
        " --platform {params.platform:q} {params.runs}"
        " --identity {input.identity} --out {output.report} > {log} 2>&1"


rule plot_benchmark:
    input:
        report=rules.report.output.report,
    output:
        time_to_train=report(
            f"{RESULTS}/{{benchmark}}/plots/time_to_train.png",
            caption="../report/time_to_train.rst",
            category="{benchmark}",
            labels={"view": "time to train per run"},
        ),
        time_to_train_svg=f"{RESULTS}/{{benchmark}}/plots/time_to_train.svg",
        convergence=report(
            f"{RESULTS}/{{benchmark}}/plots/convergence.png",
            caption="../report/convergence.rst",
            category="{benchmark}",
            labels={"view": "convergence"},
        ),
        convergence_svg=f"{RESULTS}/{{benchmark}}/plots/convergence.svg",
    log:
        f"{LOGS}/plot_benchmark/{{benchmark}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        reference_logs=reference_logs_args,
    shell:
        "mlperf-wf plot {input.report} --out-dir $(dirname {output.time_to_train})"
        " {params.reference_logs} > {log} 2>&1"


rule benchmark_page:
    input:
        report=rules.report.output.report,
        time_to_train=rules.plot_benchmark.output.time_to_train_svg,
        convergence=rules.plot_benchmark.output.convergence_svg,
    output:
        report(
            f"{RESULTS}/{{benchmark}}/overview.html",
            caption="../report/overview.rst",
            category="{benchmark}",
            labels={"view": "overview: score, runs, RCP"},
        ),
    log:
        f"{LOGS}/benchmark_page/{{benchmark}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    shell:
        "mlperf-wf overview {input.report} --figure {input.time_to_train} --figure {input.convergence}"
        " --out {output} > {log} 2>&1"


rule package:
    input:
        reports=all_reports(),
        system=PLAN.system_description(),
    output:
        # the org folder (what is uploaded) inside: Snakemake's .snakemake_timestamp stays out of it
        package=directory(f"{RESULTS}/submission/package"),
        check=report(
            f"{RESULTS}/submission/package_check.json",
            caption="../report/package.rst",
            category="summary",
            labels={"table": "submission package check"},
        ),
    log:
        f"{LOGS}/package.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        org=config["submission"]["org"],
        system=config["submission"]["platform"],
        ruleset=PLAN.package_ruleset(),
        division=PLAN.package_division(),
    shell:
        "mlperf-wf package {input.reports} --org {params.org:q} --system {params.system:q}"
        " --ruleset {params.ruleset} --division {params.division} --out {output.package}"
        " --check-out {output.check} > {log} 2>&1"


rule summarize:
    input:
        reports=all_reports(),
        package=rules.package.output.check,
    output:
        csv=report(
            f"{RESULTS}/summary.csv",
            caption="../report/summary.rst",
            category="summary",
            labels={"table": "all benchmarks"},
        ),
        figure=report(
            f"{RESULTS}/summary.png",
            caption="../report/summary.rst",
            category="summary",
            labels={"figure": "all benchmarks"},
        ),
        figure_svg=f"{RESULTS}/summary.svg",
    log:
        f"{LOGS}/summarize.log",
    conda:
        "../envs/mlperf-wf.yaml"
    shell:
        "mlperf-wf summary {input.reports} --package-check {input.package}"
        " --csv {output.csv}"
        " --figure $(dirname {output.csv})/summary > {log} 2>&1"
