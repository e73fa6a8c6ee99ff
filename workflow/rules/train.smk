# Training: one job per seeded run, writing the run's mllog result file.
# The command, launcher and scheduler request come from the plan (mlperf_wf.plan.plan).


rule train:
    input:
        unpack(train_inputs),
    output:
        result=f"{RESULTS}/{{benchmark}}/runs/{{run}}/result.txt",
        provenance=f"{RESULTS}/{{benchmark}}/runs/{{run}}/provenance.json",
    log:
        f"{LOGS}/train/{{benchmark}}/{{run}}.log",
    conda:
        "../envs/mlperf-wf.yaml"
    threads: train_field("threads")
    resources:
        runtime=train_resource("runtime"),
        mem_mb=train_resource("mem_mb"),
        nodes=train_resource("nodes"),
        gres=train_resource("gres"),
        tasks=train_resource("tasks"),
        tasks_per_gpu=train_resource("tasks_per_gpu"),
        cpus_per_gpu=train_resource("cpus_per_gpu"),
        mpi=train_resource("mpi"),
        # read at each (re)submission: a node a failed node check named is excluded from the retry
        slurm_extra=train_slurm_extra,
    params:
        spec=train_spec,
    message:
        PLAN.job_message("train")
    # The run's spec (mlperf_wf.run.job_spec) is written beside its log, then `mlperf-wf job run` runs it: the campaign
    # gate (with stop_when_doomed), the prepared tree's check, the preflight, an emptied run folder, the node check, the
    # page-cache drop, the launch, the MLLOG merge, then the provenance record; everything it prints goes to the log,
    # and its exit status is the job's (a refusal is status 2, with its reason in the log).
    shell:
        "printf '%s\\n' {params.spec:q} > {log}.spec.json;"
        " mlperf-wf job run {log}.spec.json > {log} 2>&1"
