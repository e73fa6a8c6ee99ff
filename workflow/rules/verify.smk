# Verification: every file against its md5 list (the published one, or for a hub dataset the one the
# download wrote from bytes it checked against the hub); training depends on the record.


rule verify:
    input:
        dataset=rules.download.output.dataset,
    output:
        record="resources/{scale}/verified/{dataset}.json",
    log:
        "logs/{scale}/verify/{dataset}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    threads: 4
    resources:
        mem_mb=2000,
        runtime=720,
    params:
        # Undeclared, so it survives reruns: re-verifying only re-reads changed files.
        stamps=lambda wildcards: PLAN.verified_stamps(wildcards.dataset),
    message:
        PLAN.job_message("verify")
    shell:
        "mlperf-wf verify {input.dataset} --out {output.record}"
        " --stamps {params.stamps} --jobs {threads} > {log} 2>&1"
