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
    params:
        command=train_command,
    threads: train_threads
    shell:
        "{params.command} > {log} 2>&1"
