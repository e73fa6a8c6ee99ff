"""From a config to every job: paths, commands, launchers, batch sizes, and the preflight checks of a full-scale plan."""
