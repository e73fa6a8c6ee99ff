# Compliance: the official mlperf-logging checker on every run; a failed check fails the job.
# (--benchmark/--scale: a tiny tier's declared open rules, tiny.open_rules_not_met, give passed_except_declared.)


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
        scale=SCALE,
    shell:
        "mlperf-wf compliance {input.result} --ruleset {params.ruleset}"
        " --benchmark {wildcards.benchmark} --scale {params.scale}"
        " --out {output.verdict} > {log} 2>&1"
