"""Generated cases: Hypothesis strategies, properties, half-precision models of torch, and shrunk
counterexamples written back as specs."""
