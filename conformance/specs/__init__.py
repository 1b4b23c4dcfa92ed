"""Loading and validating spec files: YAML -> Spec/Case objects, errors with file:line:field."""

from conformance.specs.load import Case, Spec, SpecError, load_spec, spec_schema

__all__ = ["Case", "Spec", "SpecError", "load_spec", "spec_schema"]
