# Acquisition: the MLCommons R2 protocol or the Hugging Face Hub at a pinned commit,
# resumable, parallel, checked while streaming, staged (mlperf_wf.acquire.download, mlperf_wf.acquire.hub).
# At tiny scale a seeded generator writes a local mirror in the dataset's layout first.


rule generate_tiny_mirror:
    output:
        mirror=directory("resources/tiny/mirror/{dataset}"),
    log:
        "logs/tiny/generate_tiny_mirror/{dataset}.log",
    cache: True
    conda:
        "../envs/mlperf-wf.yaml"
    # The wildcards are params, not {wildcards.*} in the shell line: Snakemake's output cache keys a job by
    # its params and the unformatted shell line, so without them every dataset would share one cache entry.
    params:
        dataset="{dataset}",
    shell:
        "mlperf-wf mirror --dataset {params.dataset} --out {output.mirror} > {log} 2>&1"


rule download:
    input:
        unpack(download_inputs),
    output:
        dataset=directory("resources/{scale}/datasets/{dataset}"),
    log:
        "logs/{scale}/download/{dataset}.log",
    cache: "omit-software"
    conda:
        "../envs/mlperf-wf.yaml"
    threads: 4
    resources:
        mem_mb=4000,
        runtime=1440,
    params:
        dataset="{dataset}",
        source=download_source_args,
        connections=planning.DOWNLOAD_CONNECTIONS,
    shell:
        "mlperf-wf download --dataset {params.dataset} --dest {output.dataset}"
        " {params.source} --jobs {params.connections} > {log} 2>&1"
