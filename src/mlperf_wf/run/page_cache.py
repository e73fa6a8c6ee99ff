"""Dropping a node's page cache before a run, as the rules ask: the one shell line the launch lines of full-scale runs
(``mlperf_wf.run.launchers.drop_page_cache``) and the tiny trainers (``mlperf_wf.run.mllog_utils.clear_caches``) run."""

from __future__ import annotations

DROP_CACHES_FILE = "/proc/sys/vm/drop_caches"
"""Writing 3 here drops the page cache, dentries and inodes (after ``sync``, nothing dirty is lost)."""
DROP_CACHES_SUDO = "sudo -n /sbin/sysctl -q vm.drop_caches=3"
"""The same through sudo, never asking for a password (NVIDIA's run.sub: ``sudo /sbin/sysctl vm.drop_caches=3``)."""


def drop_on_this_node(target: str = DROP_CACHES_FILE) -> str:
    """Shell that flushes and drops this node's page cache, directly or through sudo without a password; it fails when
    neither is allowed. The one way the workflow drops it: the launch line of every full-scale run and tiny runs alike."""
    return f"sync && {{ echo 3 > {target} || {DROP_CACHES_SUDO}; }}"
