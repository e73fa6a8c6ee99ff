"""Compliance, scores, reports, packages, status."""
