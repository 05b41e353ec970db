"""Learning and scoring: features, analytic priors, the model registry (`models/`), training and the
champion, intervals, out-of-distribution flags, the champion gate, bulk scoring."""
