"""The shared declarations every stage stands on: dtypes, tensors, devices, the case and result types,
comparison and rounding, diagnosis, outcomes, registered divergences and the typed record."""
