# Preparation: the benchmark's preprocessing module over its verified datasets.


rule preprocess:
    input:
        unpack(preprocess_inputs),
    output:
        prepared=directory("resources/{scale}/prepared/{benchmark}"),
    log:
        "logs/preprocess/{scale}/{benchmark}.log",
    cache: True
    conda:
        "../envs/mlperf-wf.yaml"
    threads: 2
    resources:
        mem_mb=16000,
        runtime=1440,
    params:
        benchmark="{benchmark}",
        scale="{scale}",
        inputs=preprocess_role_args,
    shell:
        "mlperf-wf preprocess --benchmark {params.benchmark} --scale {params.scale}"
        " {params.inputs} --out {output.prepared} > {log} 2>&1"
