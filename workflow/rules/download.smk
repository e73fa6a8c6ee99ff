# Acquisition: the MLCommons R2 protocol or the Hugging Face Hub at a pinned commit,
# resumable, parallel, checked while streaming, staged (mlperf_wf.acquire.download, mlperf_wf.acquire.hub).
# At tiny scale a seeded generator writes a local mirror in the dataset's layout first.
# A dataset nobody publishes (protocol made_in_image) is made at full scale by a one-off job of its benchmark's image.


# Both make resources/full/datasets/<id>; a dataset made in an image is never downloaded at full scale.
ruleorder: make_in_image > download


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
    message:
        PLAN.job_message("generate_tiny_mirror")
    # Its log takes everything; a long generator's progress lines (the base model's pretraining) reach the terminal too.
    shell:
        "mlperf-wf --progress-fd 3 mirror --dataset {params.dataset} --out {output.mirror} 3>&2 > {log} 2>&1"


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
    message:
        PLAN.job_message("download")
    shell:
        "mlperf-wf download --dataset {params.dataset} --dest {output.dataset}"
        " {params.source} --jobs {params.connections} > {log} 2>&1"


# A one-off full-scale job of the benchmark's image (the reference's own code, on the runs' geometry) writes the
# dataset into its folder, mounted read-write (mlperf_wf.plan.plan.Plan.image_job); then `seal` checks the catalog's
# files are there and writes the md5 list the verify stage checks. Its mllog stays in its own folder, never scored.
rule make_in_image:
    input:
        unpack(image_job_inputs),
    output:
        dataset=directory("resources/full/datasets/{dataset}"),
    log:
        "logs/full/make_in_image/{dataset}.log",
    wildcard_constraints:
        dataset=MADE_IN_IMAGE,
    conda:
        "../envs/mlperf-wf.yaml"
    threads: image_job_field("threads")
    resources:
        runtime=image_job_resource("runtime"),
        mem_mb=image_job_resource("mem_mb"),
        nodes=image_job_resource("nodes"),
        gres=image_job_resource("gres"),
        tasks=image_job_resource("tasks"),
        tasks_per_gpu=image_job_resource("tasks_per_gpu"),
        cpus_per_gpu=image_job_resource("cpus_per_gpu"),
        mpi=image_job_resource("mpi"),
        slurm_extra=train_slurm_extra,
    params:
        dataset="{dataset}",
        spec=image_job_spec,
    # as the train rule: the job's spec beside its log, run by `mlperf-wf job run` (the prepared tree checked first),
    # the whole job's output in its log
    shell:
        "printf '%s\\n' {params.spec:q} > {log}.spec.json;"
        " mlperf-wf job run {log}.spec.json > {log} 2>&1;"
        " mlperf-wf seal --dataset {params.dataset} {output.dataset} >> {log} 2>&1"
