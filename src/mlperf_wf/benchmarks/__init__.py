"""The benchmarks: one folder each, discovered (a folder with a ``benchmark.yaml`` is a benchmark).

``<name>/`` holds everything that is the benchmark's own:

- ``benchmark.yaml``: the definition (``mlperf_wf.config.registry.BenchmarkDef``): ``submission_benchmark``,
  the reference at its pinned commit, the datasets it needs by role and which stage reads each, and
  how the reference runs at full scale (container, geometry, mounts by role, command).
- ``hyperparameters.py``: ``Hyperparameters``, the typed tiny-tier hyperparameter model (its defaults
  are the values; ``mllog()`` maps them to the keys the round requires).
- ``prepare.py``: ``shards(scale)``, ``prepare_shard(shard, inputs, out_dir, scale)`` (one cached job
  each), ``layout(scale)`` (the tree the runs read, as links into the shards) and optionally
  ``resources(shard, scale)``.
- ``trainer.py``: ``train(run: TinyRun, hp: Hyperparameters) -> dict``, the model, its data and its step;
  ``mlperf_wf.run.harness`` does the rest.
- its tiny data generator modules (named by its dataset catalog entries), and ``README.md``.

- ``datasets/<id>.yaml``: the catalog entries only this benchmark reads (``mlperf_wf.config.registry.dataset_file``;
  an entry several benchmarks read is in ``config/datasets/``).
- ``container/``: its image definitions (``Dockerfile``, built with the repository root as the context,
  ``Apptainer.def``) and the round patches (``patches/``) the images and the ``local`` launcher put on ``PYTHONPATH``.

Its tests, its rehearsal and its golden plans are beside it, in ``tests/benchmarks/<name>/``.
"""
