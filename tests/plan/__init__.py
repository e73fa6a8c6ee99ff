"""Plans: golden command lines, launchers, preflight, sizing, the page cache."""
