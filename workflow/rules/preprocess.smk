# Preparation: the benchmark's preprocessing module (or the preparation the config picks),
# one cached job per shard (an edge type, a feature array, a day file ...; a shard may read
# earlier shards), then the tree its trainer reads, as links.
# A killed preparation redoes only the shards that had not finished.


localrules:
    assemble_prepared,


rule preprocess_shard:
    input:
        unpack(preprocess_inputs),
    output:
        shard=directory("resources/{scale}/prepared/{benchmark}/shards/{shard}"),
    log:
        "logs/{scale}/preprocess/{benchmark}/{shard}.log",
    cache: True
    conda:
        "../envs/mlperf-wf.yaml"
    threads: 2
    resources:
        mem_mb=shard_resource("mem_mb"),
        runtime=shard_resource("runtime"),
    # The wildcards are params (the output cache's key; see download.smk's generate_tiny_mirror).
    params:
        benchmark="{benchmark}",
        scale="{scale}",
        shard="{shard}",
        inputs=preprocess_role_args,
    message:
        PLAN.job_message("preprocess_shard")
    shell:
        "mlperf-wf preprocess --benchmark {params.benchmark} --scale {params.scale}"
        " --shard {params.shard} {params.inputs} --out {output.shard} > {log} 2>&1"


# Links only (seconds at any size), so not cached: a second workflow directory
# relinks the shards it fetched from the cache.
rule assemble_prepared:
    input:
        shards=preprocess_shards,
    output:
        dataset=directory("resources/{scale}/prepared/{benchmark}/dataset"),
    log:
        "logs/{scale}/assemble_prepared/{benchmark}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    params:
        benchmark="{benchmark}",
        scale="{scale}",
        shards="resources/{scale}/prepared/{benchmark}/shards",
        preparation=preparation_args,
    message:
        PLAN.job_message("assemble_prepared")
    shell:
        "mlperf-wf assemble --benchmark {params.benchmark} --scale {params.scale}"
        " --shards {params.shards} {params.preparation} --out {output.dataset} > {log} 2>&1"
