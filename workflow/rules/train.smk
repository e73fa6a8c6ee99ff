# Training: one job per seeded run, writing the run's mllog result file.


rule train:
    input:
        unpack(train_inputs),
    output:
        result="results/{benchmark}/runs/{run}/result.txt",
        provenance="results/{benchmark}/runs/{run}/provenance.json",
    log:
        "logs/train/{benchmark}/{run}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    threads: train_threads
    resources:
        runtime=train_runtime,
        mem_mb=train_mem_mb,
        nodes=train_nodes,
        gres=train_gres,
        tasks=train_tasks,
        tasks_per_gpu=train_tasks_per_gpu,
        cpus_per_gpu=train_cpus_per_gpu,
        mpi=train_mpi,
    params:
        command=train_command,
        launcher=train_launcher,
        image=train_image,
    shell:
        "{params.command} > {log} 2>&1;"
        " mlperf-wf provenance --out {output.provenance} --launcher {params.launcher}"
        " --image={params.image:q} --command={params.command:q} >> {log} 2>&1"
