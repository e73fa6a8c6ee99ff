# The rehearsal of a benchmark's full-scale job (`mlperf-wf rehearse`): its train job on two nodes (one for a one-node
# benchmark), stopped after a few training steps. Nothing it writes is under results/: no campaign reads or scores it.


rule rehearse:
    input:
        unpack(train_inputs),
    output:
        done=touch("rehearsal/{benchmark}/{steps}-steps.done"),
    log:
        "rehearsal/{benchmark}/{steps}-steps.log",
    wildcard_constraints:
        steps=r"\d+",
    conda:
        "../envs/mlperf-wf.yaml"
    threads: job_field(planned_rehearsal_job, "threads")
    resources:
        runtime=job_resource(planned_rehearsal_job, "runtime"),
        mem_mb=job_resource(planned_rehearsal_job, "mem_mb"),
        nodes=job_resource(planned_rehearsal_job, "nodes"),
        gres=job_resource(planned_rehearsal_job, "gres"),
        tasks=job_resource(planned_rehearsal_job, "tasks"),
        tasks_per_gpu=job_resource(planned_rehearsal_job, "tasks_per_gpu"),
        cpus_per_gpu=job_resource(planned_rehearsal_job, "cpus_per_gpu"),
        mpi=job_resource(planned_rehearsal_job, "mpi"),
        slurm_extra=rehearsal_slurm_extra,
    params:
        command=job_field(planned_rehearsal_job, "command"),
    # as the train rule: the prepared tree checked first, the whole line's output in the job's log
    shell:
        "{{ mlperf-wf check-prepared {input.prepared} || exit $?; {params.command}; }} > {log} 2>&1"
