"""Running items: the pytest plugin (options, collection, items), the runner that checks one item,
outcomes, the results file, xdist transfer, crashed workers, timeouts, signals, generated items and
benchmarks."""
