"""bench: timings the project ships (`lab bench`), each against a floor measured in the same run."""
