# Verification: every file against the published md5 list; training depends on the record.


rule verify:
    input:
        dataset=rules.download.output.dataset,
    output:
        record="resources/{scale}/verified/{dataset}.json",
    log:
        "logs/verify/{scale}/{dataset}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    shell:
        "mlperf-wf verify {input.dataset} --out {output.record} > {log} 2>&1"
