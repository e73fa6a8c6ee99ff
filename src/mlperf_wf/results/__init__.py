"""What a run and a campaign produced: compliance, scores, reports, figures, the package, where a campaign stands."""
