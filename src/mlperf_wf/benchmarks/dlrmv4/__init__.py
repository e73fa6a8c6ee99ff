"""dlrmv4: HSTU generative recommender on Yambda-5b (MLPerf Training 6.1)."""
