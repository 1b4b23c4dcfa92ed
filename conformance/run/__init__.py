"""Running items: the pytest plugin (options, collection, items), the runner that checks one item,
outcomes, results-file hooks, generated items and benchmarks."""
