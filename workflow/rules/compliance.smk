# Compliance: the official mlperf-logging checker on every run; a failed check fails the job.


# A second per run: not worth a scheduler round trip.
localrules:
    check_compliance,


rule check_compliance:
    input:
        result=rules.train.output.result,
    output:
        verdict=f"{RESULTS}/{{benchmark}}/runs/{{run}}/compliance.json",
    log:
        f"{LOGS}/check_compliance/{{benchmark}}/{{run}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        ruleset=wildcard_ruleset,
    shell:
        "mlperf-wf compliance {input.result} --ruleset {params.ruleset}"
        " --out {output.verdict} > {log} 2>&1"
