# Report: per-run time to train, samples to converge, compliance, and the olympic score.


localrules:
    report,
    plot_benchmark,
    summarize,
    package,


rule report:
    input:
        results=report_results,
        verdicts=report_verdicts,
        provenance=report_provenance,
    output:
        report="results/{benchmark}/report.json",
    log:
        "logs/report/{benchmark}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        benchmark="{benchmark}",
        ruleset=wildcard_ruleset,
        division=config["division"],
        scale=config["scale"],
        platform=config["submission"]["platform"],
        runs=report_args,
    shell:
        "mlperf-wf report --benchmark {params.benchmark} --ruleset {params.ruleset}"
        " --division {params.division} --scale {params.scale}"
        " --platform {params.platform:q} {params.runs}"
        " --out {output.report} > {log} 2>&1"


rule plot_benchmark:
    input:
        report=rules.report.output.report,
    output:
        time_to_train=report(
            "results/{benchmark}/plots/time_to_train.png",
            caption="../report/time_to_train.rst",
            category="{benchmark}",
            labels={"figure": "time to train per run"},
        ),
        time_to_train_svg="results/{benchmark}/plots/time_to_train.svg",
        convergence=report(
            "results/{benchmark}/plots/convergence.png",
            caption="../report/convergence.rst",
            category="{benchmark}",
            labels={"figure": "convergence"},
        ),
        convergence_svg="results/{benchmark}/plots/convergence.svg",
    log:
        "logs/plot_benchmark/{benchmark}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    shell:
        "mlperf-wf plot {input.report} --out-dir $(dirname {output.time_to_train})"
        " > {log} 2>&1"


rule package:
    input:
        reports=all_reports(),
    output:
        package=directory(f"results/submission/{config['submission']['org']}"),
        check=report(
            "results/submission/package_check.json",
            caption="../report/package.rst",
            category="summary",
            labels={"table": "submission package check"},
        ),
    log:
        "logs/package.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        org=config["submission"]["org"],
        system=config["submission"]["platform"],
        ruleset=package_ruleset(),
    shell:
        "mlperf-wf package {input.reports} --org {params.org:q} --system {params.system:q}"
        " --ruleset {params.ruleset} --out $(dirname {output.package})"
        " --check-out {output.check} > {log} 2>&1"


rule summarize:
    input:
        reports=all_reports(),
        package=rules.package.output.check,
    output:
        csv=report(
            "results/summary.csv",
            caption="../report/summary.rst",
            category="summary",
            labels={"table": "all benchmarks"},
        ),
        figure=report(
            "results/summary.png",
            caption="../report/summary.rst",
            category="summary",
            labels={"figure": "all benchmarks"},
        ),
        figure_svg="results/summary.svg",
    log:
        "logs/summarize.log",
    conda:
        "../envs/mlperf-wf.yaml"
    shell:
        "mlperf-wf summary {input.reports} --package-check {input.package}"
        " --csv {output.csv}"
        " --figure results/summary > {log} 2>&1"
