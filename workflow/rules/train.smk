# Training: one job per seeded run, writing the run's mllog result file.


rule train:
    input:
        unpack(train_inputs),
    output:
        result="results/{benchmark}/runs/{run}/result.txt",
    log:
        "logs/train/{benchmark}/{run}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    threads: train_threads
    params:
        command=train_command,
    shell:
        "{params.command} > {log} 2>&1"
