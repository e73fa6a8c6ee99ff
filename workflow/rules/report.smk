# Report: per-run time to train, samples to converge, compliance, and the olympic score.


localrules:
    campaign_identity,
    report,
    plot_benchmark,
    summarize,
    package,


# The identity every run of the set must share (mlperf_wf.run.identity); made again when the config changes it.
rule campaign_identity:
    output:
        identity=f"{RESULTS}/{{benchmark}}/identity.json",
    log:
        f"{LOGS}/campaign_identity/{{benchmark}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        identity=expected_identity,
    message:
        PLAN.job_message("campaign_identity")
    shell:
        "mlperf-wf identity --json {params.identity:q} --out {output.identity} > {log} 2>&1"


rule report:
    input:
        results=run_files("result.txt"),
        verdicts=run_files("compliance.json"),
        provenance=run_files("provenance.json"),
        identity=rules.campaign_identity.output.identity,
        power_record=power_record,
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
        doomed=doomed_args,
    message:
        PLAN.job_message("report")
    shell:
        "mlperf-wf report --benchmark {params.benchmark} --ruleset {params.ruleset}"
        " --division {params.division} --scale {params.scale}"
        " --platform {params.platform:q} {params.runs} {params.doomed}"
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
    message:
        PLAN.job_message("plot_benchmark")
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
    message:
        PLAN.job_message("benchmark_page")
    shell:
        "mlperf-wf overview {input.report} --figure {input.time_to_train} --figure {input.convergence}"
        " --out {output} > {log} 2>&1"


rule package:
    input:
        reports=package_reports,
        system=PLAN.system_description_input(),
        changed=package_change_record,
    output:
        # the org folder (what is uploaded) inside: Snakemake's .snakemake_timestamp stays out of it
        package=directory(f"{RESULTS}/submission/{{ruleset}}-{{division}}/package"),
        check=report(
            f"{RESULTS}/submission/{{ruleset}}-{{division}}/package_check.json",
            caption="../report/package.rst",
            category="summary",
            labels={"table": "submission package check {ruleset} {division}"},
        ),
    log:
        f"{LOGS}/package/{{ruleset}}-{{division}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        finished=package_finished,
        finished_digests=package_finished_digests,
        org=config["submission"]["org"],
        system=config["submission"]["platform"],
    message:
        PLAN.job_message("package")
    shell:
        "mlperf-wf package {input.reports} {params.finished} --org {params.org:q} --system {params.system:q}"
        " --ruleset {wildcards.ruleset} --division {wildcards.division} --out {output.package}"
        " --check-out {output.check} > {log} 2>&1"


rule summarize:
    input:
        reports=all_reports(),
        package=all_package_checks(),
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
    params:
        finished=PLAN.finished_reports(),
        finished_digests=summary_finished_digests,
        package_checks=package_check_args,
    message:
        PLAN.job_message("summarize")
    shell:
        "mlperf-wf summary {input.reports} {params.finished} {params.package_checks}"
        " --csv {output.csv}"
        " --figure $(dirname {output.csv})/summary > {log} 2>&1"
