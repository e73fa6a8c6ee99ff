# Compliance: the official mlperf-logging checker on every run; a failed check fails the job.
# (--benchmark/--scale: a tiny tier's declared open rules, tiny.open_rules_not_met, give passed_except_declared.)
# The log must be the run's: the bytes its train job recorded (provenance), its benchmark, division and seed.


# A second per run: not worth a scheduler round trip.
localrules:
    check_compliance,


rule check_compliance:
    input:
        result=rules.train.output.result,
        provenance=rules.train.output.provenance,
    output:
        verdict=f"{RESULTS}/{{benchmark}}/runs/{{run}}/compliance.json",
    log:
        f"{LOGS}/check_compliance/{{benchmark}}/{{run}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        ruleset=wildcard_ruleset,
        scale=SCALE,
        division=wildcard_division,
        seed=wildcard_seed,
    message:
        PLAN.job_message("check_compliance")
    shell:
        "mlperf-wf compliance {input.result} --ruleset {params.ruleset}"
        " --benchmark {wildcards.benchmark} --scale {params.scale}"
        " --division {params.division} --seed {params.seed}"
        " --provenance {input.provenance}"
        " --out {output.verdict} > {log} 2>&1"
