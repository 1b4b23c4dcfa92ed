"""Each outcome the harness can report, produced on purpose through a real pytest run."""

from __future__ import annotations

import textwrap

import pytest

from conformance_runs import NO_GC_AT_EXIT, REPO

BASIC_SPEC = textwrap.dedent("""
    op: coalesce
    cases:
      - id: basic
        derivation: "(1,0): 4 + 5 = 9"
        dtypes: [float32]
        inputs:
          tensor: {indices: [[0, 1, 1], [2, 0, 0]], values: [3.0, 4.0, 5.0], size: [2, 3]}
        expected:
          indices: [[0, 1], [2, 0]]
          values: [3.0, 9.0]
""")

CANDIDATES = textwrap.dedent("""
    import torch

    def good(t):
        return t.coalesce()

    def off_by_one(t):
        c = t.coalesce()
        return torch.sparse_coo_tensor(c._indices(), c._values() + (c._indices()[0] == 1), c.shape).coalesce()

    def raises(t):
        raise RuntimeError("boom from the candidate")
""")


@pytest.fixture
def spec_dir(pytester: pytest.Pytester, warm_imports):
    pytester.makefile(".yaml", **{"specs/basic": BASIC_SPEC})
    pytester.makepyfile(cands=CANDIDATES)
    pytester.syspathinsert()
    return pytester


def run(pytester: pytest.Pytester, *args: str, target: str = "specs"):
    # these tests count the spec items; the generated (Hypothesis) items have tests/test_generated.py
    return pytester.runpytest_inprocess(target, "-p", "no:cacheprovider", *NO_GC_AT_EXIT, "-rA", "--conformance-examples", "0",
                                         *args)


def test_passed_on_every_builtin_backend(spec_dir):
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-backend", "reference,dense,coo")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["PASSED specs/basic.yaml::basic[[]coo-cpu-float32[]]"])


def test_unsupported_is_its_own_outcome(spec_dir):
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-backend", "masked")
    result.stdout.fnmatch_lines(["*UNSUPPORTED*MaskedTensor has no coalesce*", "*1 unsupported*"])
    assert result.ret == 0
    assert "passed" not in result.stdout.lines[-1]


def test_failed_reports_errors_and_first_index(spec_dir):
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "coalesce=cands:off_by_one")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*basic.yaml:3: basic[[]candidate-cpu-float32[]]*",
        "*values differs from the golden values*max abs error 1, max rel error 0.111111, first at index (1,)*",
    ])
    assert result.ret == 1


def test_error_when_the_candidate_raises_and_the_run_goes_on(spec_dir):
    spec_dir.makefile(".yaml", **{"specs/second": BASIC_SPEC.replace("id: basic", "id: second")})
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "coalesce=cands:raises")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*RuntimeError: boom from the candidate*"])
    assert result.ret == 1


def test_candidate_that_conforms_passes_the_gate(spec_dir):
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "coalesce=cands:good")
    result.assert_outcomes(passed=1)
    assert result.ret == 0


def test_known_divergence_is_xfail_with_reason_and_link(spec_dir):
    spec_dir.makefile(".yaml", **{"specs/half": textwrap.dedent("""
        op: coalesce
        cases:
          - id: ones
            derivation: 4096 ones sum to 4096
            dtypes: [float16]
            inputs:
              tensor: {indices: {fill: 0, shape: [1, 4096]}, values: {fill: 1.0, shape: [4096]}, size: [1]}
            expected:
              values: [4096.0]
            known_divergences:
              - backends: [coo]
                reason: half-precision accumulation
                link: https://example.org/issue
        """)})
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-backend", "coo,reference",
                 target="specs/half.yaml")
    result.assert_outcomes(passed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*XFAIL*ones[[]coo-cpu-float16[]]*half-precision accumulation (https://example.org/issue)*"])


def _fnmatch_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)


def test_unavailable_device_is_skipped_with_the_reason(spec_dir):
    from conformance.core.devices import DEVICES

    # a device that is really unavailable on this machine (cuda without a GPU, xla without torch_xla)
    unavailable = {name: DEVICES[name].probe() for name in ("cuda", "xla")}
    unavailable = {name: reason for name, reason in unavailable.items() if reason}
    if not unavailable:
        pytest.skip("every optional device (cuda, xla) is available here, so none can be shown skipped")
    device, reason = next(iter(unavailable.items()))
    result = run(spec_dir, "--conformance-device", device, "--conformance-backend", "coo")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*SKIPPED*{_fnmatch_escape(reason.splitlines()[0][:40])}*"])


def test_invalid_spec_names_file_and_line_and_others_still_run(spec_dir):
    spec_dir.makefile(".yaml", **{"specs/broken": textwrap.dedent("""
        op: coalesce
        cases:
          - id: broken
            inputs:
              tensor: {indices: [[0]], values: [1.0], size: [2]}
            expected:
              valuez: [1.0]
        """)})
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-backend", "coo")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*invalid spec: *specs/broken.yaml:7: cases[[]0[]].expected.valuez: unexpected field 'valuez'; allowed here: indices, nnz, size, values*"])


def test_expected_error_must_be_raised(spec_dir):
    spec_dir.makefile(".yaml", **{"specs/errors": textwrap.dedent("""
        op: adagrad
        cases:
          - id: weight-decay
            dtypes: [float32]
            inputs:
              param: [1.0, 2.0]
              grads: [{indices: [[0]], values: [1.0], size: [2]}]
              hyperparameters: {weight_decay: 0.1}
            expected_error: {type: RuntimeError, match: "weight_decay option is not compatible"}
        """)})
    passing = run(spec_dir, "--conformance-device", "cpu", "--conformance-backend", "reference,dense,coo,masked",
                  target="specs/errors.yaml")
    passing.assert_outcomes(passed=4)
    # a candidate is judged by the kind of its refusal: torch's SGD raises a RuntimeError of its own
    # words there (conforms); one raising ValueError where torch raises RuntimeError does not
    own_words = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "adagrad=torch.optim:SGD",
                    target="specs/errors.yaml")
    own_words.assert_outcomes(passed=1)
    failing = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl",
                  f"adagrad={REPO}/tests/candidates/users.py:ValueErrorAdagrad", target="specs/errors.yaml")
    failing.assert_outcomes(failed=1)
    failing.stdout.fnmatch_lines(["*expected RuntimeError, the type torch raises here*it raised ValueError*"])


def test_bad_impl_option_is_a_usage_error(spec_dir):
    result = run(spec_dir, "--conformance-impl", "adagrad=cands:good")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cands:good*is not a torch.optim.Optimizer subclass*"])
    result = run(spec_dir, "--conformance-impl", "nosuchop=cands:good")
    result.stderr.fnmatch_lines(["*unknown op 'nosuchop'*"])
    result = run(spec_dir, "--conformance-backend", "nosuch")
    result.stderr.fnmatch_lines(["*unknown backend(s) nosuch*"])


PINNED_ERROR_SPEC = """
    op: coalesce
    cases:
      - id: one
        derivation: one entry, nothing to sum
        inputs:
          tensor: {{indices: [[0]], values: [1.0], size: [2]}}
        expected:
          indices: [[0]]
          values: [1.0]
        known_divergences:
          - backends: [candidate]
            kind: error
            raises: RuntimeError
            match: {match}
            reason: the candidate's documented refusal
    """


@pytest.mark.parametrize("match, outcome", [("boom from", {"xfailed": 2}), ("another refusal", {"errors": 2})])
def test_a_known_error_is_pinned_by_type_and_message(spec_dir, match, outcome):
    """A divergence of kind error excuses only the exception it names: another message (or type) fails the
    item (an error, as without the divergence), so the suite's own error or a new one can never pass as the
    known one (issue 51). Two items: the spec's default dtypes, float32 and float64."""
    spec_dir.makefile(".yaml", **{"specs/pinned": textwrap.dedent(PINNED_ERROR_SPEC.format(match=repr(match)))})
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "coalesce=cands:raises",
                 "--conformance-backend", "candidate", target="specs/pinned.yaml")
    result.assert_outcomes(**outcome)


def test_a_known_error_without_its_exception_is_an_invalid_spec(spec_dir):
    text = textwrap.dedent(PINNED_ERROR_SPEC.format(match="x")).replace("        raises: RuntimeError\n", "")
    spec_dir.makefile(".yaml", **{"specs/unpinned": text})
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "coalesce=cands:raises",
                 "--conformance-backend", "candidate", target="specs/unpinned.yaml")
    result.stdout.fnmatch_lines(["*unpinned.yaml*known_divergences[[]0[]]*raises*"])
    assert result.ret != 0


EXPECTED_ERROR_MISSED_SPEC = """
    op: sparse_adam
    cases:
      - id: beta1-out-of-range
        description: the constructor rejects beta1 = 1
        inputs:
          param: [1.0]
          grads:
            - {{indices: [[0]], values: [1.0], size: [1]}}
          hyperparameters: {{betas: [1.0, 0.999]}}
        expected_error:
          type: ValueError
          match: "^Invalid beta parameter at index 0: 1.0$"
        known_divergences:
          - backends: [candidate]
            kind: error
            raises: NotImplementedError
            match: {match}
            reason: the candidate's documented refusal of betas
    """

REFUSES_BETAS = textwrap.dedent("""
    import torch

    class RefusesBetas(torch.optim.SparseAdam):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
            raise NotImplementedError("betas are not implemented here")
""")


@pytest.mark.parametrize("match, outcome", [("betas are not", {"xfailed": 2}), ("another refusal", {"failed": 2})])
def test_a_known_error_raised_where_the_case_expects_another_is_pinned_too(spec_dir, match, outcome):
    """Where the case expects one error and the implementation raises another, a divergence of kind error
    that pins the one raised (its type and message) is that divergence; another message fails the item."""
    spec_dir.makefile(".yaml", **{"specs/missed": textwrap.dedent(EXPECTED_ERROR_MISSED_SPEC.format(match=repr(match)))})
    spec_dir.makepyfile(betas=REFUSES_BETAS)
    result = run(spec_dir, "--conformance-device", "cpu", "--conformance-impl", "sparse_adam=betas:RefusesBetas",
                 "--conformance-backend", "candidate", target="specs/missed.yaml")
    result.assert_outcomes(**outcome)
