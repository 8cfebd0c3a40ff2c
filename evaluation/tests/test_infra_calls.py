"""An answer the client or the proxy stopped reading past CLAWGYM_MAX_RESPONSE_BYTES is the infrastructure's failure,
never the model's (issue 20, item 6): a stream had its 200 before it went past the limit, a whole answer got a 502."""

from evaluation.infra import is_infra_call
from llm.failures import too_large


def test_an_answer_past_the_limit_is_the_infrastructures_failure():
    assert is_infra_call(200, too_large(1024 * 1024))
    assert is_infra_call(502, too_large(1024 * 1024))
    assert not is_infra_call(200, "")
