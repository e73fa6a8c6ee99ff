"""A NeMo-Run experiment whose task fails ends its process with a failure (round patches of the NeMo references).

NeMo-Run's ``Experiment.run`` (run/experiment.py:588-608 at 34259bd, the commit NeMo 24.12 pins) launches the tasks one
after the other, logs a task that raised and goes on, and never looks at how a waited task ended: a
``build_data_index`` that failed is followed by the training task, and a training task that failed leaves the script
to exit 0. The job then "succeeds", the workflow's retry never comes, and the run only fails later at compliance.

:func:`fail_with_the_first_failed_task` wraps ``ExperimentTask.launch`` (run/task.py:142-187): when a launch that
waited for its task (the local executor always waits, experiment.py:574-581) ends in any state but ``SUCCEEDED``, or
the launch itself raises, the process exits with :data:`TASK_FAILED` before the next task starts, with the task named
on stderr. A launch that does not wait (a detached SLURM submission) is left as it is.
"""

import sys
import traceback
from types import ModuleType

from sitecustomize import after_import

TASK_FAILED = 1
"""The exit status of a launcher process whose NeMo-Run task failed."""


def _ended(task: object) -> str:
    state = getattr(task, "state", None)
    return str(getattr(state, "name", state))


def _end_the_experiment(task: object, why: str) -> None:
    print(
        "mlperf-wf: NeMo-Run task {} {}: the experiment stops here and the job fails (NeMo-Run itself would start the next task and exit 0)".format(
            getattr(task, "id", "?"), why
        ),
        file=sys.stderr,
        flush=True,
    )
    sys.exit(TASK_FAILED)  # SystemExit passes Experiment.run's `except Exception` around each launch


def _patch_task(module: ModuleType) -> None:
    launch = module.ExperimentTask.launch

    def launch_and_stop_at_a_failure(self, *args, **kwargs):
        waited = kwargs.get("wait", args[0] if args else False)
        dry = kwargs.get("dryrun", args[2] if len(args) > 2 else False)
        try:
            result = launch(self, *args, **kwargs)
        except Exception:
            traceback.print_exc()
            _end_the_experiment(self, "could not be launched")
        if waited and not dry and _ended(self) != "SUCCEEDED":
            _end_the_experiment(self, "ended " + _ended(self))
        return result

    module.ExperimentTask.launch = launch_and_stop_at_a_failure


def fail_with_the_first_failed_task() -> None:
    """Patch NeMo-Run's task launch when ``nemo_run.run.task`` is imported (see the module's docstring)."""
    after_import("nemo_run.run.task", _patch_task)
