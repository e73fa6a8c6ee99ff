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
        command=train_field("command"),
        launcher=train_field("launcher"),
        image=train_field("image"),
        scale=SCALE,
        node_checks=node_check_records,
        gate=campaign_gate,
        identity_config=identity_config,
    message:
        PLAN.job_message("train")
    # With stop_when_doomed, the gate first: a benchmark that can no longer pass ends the job, not started (exit 3).
    # The prepared tree is checked against its stamps first (a byte changed since, even with its mtime restored);
    # `|| exit`: bash's errexit does not stop at the left side of a failing `&&`.
    # The whole command line in one group, so that everything it prints (the job's own preflight, the page-cache drop,
    # each srun step) goes to the job's log, and a refusal (`exit 2`) ends the job with its reason there.
    shell:
        "{{ {params.gate}mlperf-wf check-prepared {input.prepared} || exit $?; {params.command}; }} > {log} 2>&1;"
        " mlperf-wf provenance --out {output.provenance} --result {output.result} --consumed {input}"
        " --scale {params.scale}"
        " --launcher {params.launcher} --image={params.image:q}"
        " --command={params.command:q} --node-checks={params.node_checks:q}"
        " --config={params.identity_config:q} >> {log} 2>&1"
