"""The runners' command line: shared flags, the steps every runner takes
(train, evaluate, predict, write results) and progress lines."""
