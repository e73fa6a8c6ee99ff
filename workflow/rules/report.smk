# Report: per-run time to train, samples to converge, compliance, and the olympic score.


localrules:
    report,


rule report:
    input:
        results=report_results,
        verdicts=report_verdicts,
    output:
        report="results/{benchmark}/report.json",
    log:
        "logs/report/{benchmark}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        benchmark="{benchmark}",
        ruleset=config["ruleset"],
        division=config["division"],
        scale=config["scale"],
        platform=config["submission"]["platform"],
        runs=report_args,
    shell:
        "mlperf-wf report --benchmark {params.benchmark} --ruleset {params.ruleset}"
        " --division {params.division} --scale {params.scale}"
        " --platform {params.platform:q} {params.runs}"
        " --out {output.report} > {log} 2>&1"
