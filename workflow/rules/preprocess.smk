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
    params:
        inputs=preprocess_role_args,
    shell:
        "mlperf-wf preprocess --benchmark {wildcards.benchmark} --scale {wildcards.scale}"
        " --shard {wildcards.shard} {params.inputs} --out {output.shard} > {log} 2>&1"


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
        preparation=preparation_args,
    shell:
        "mlperf-wf assemble --benchmark {wildcards.benchmark} --scale {wildcards.scale}"
        " --shards resources/{wildcards.scale}/prepared/{wildcards.benchmark}/shards {params.preparation} --out {output.dataset} > {log} 2>&1"
