"""Make a generated method look like the file's own: what ruff format leaves to the author.

ruff lays out the code; it does not choose between ``-> torch.Tensor`` and
``-> "torch.Tensor"``. The generated return annotation takes the style of
the ``compute_logits`` it mirrors (the parameters are copied from it as they
are), so the two methods read alike.
"""

from __future__ import annotations

import libcst as cst

from ..cstnodes import parse_method
from ..index.fact_types import libcst_code


def follow_annotation_style(method: cst.FunctionDef, compute_logits_text: str) -> cst.FunctionDef:
    """Quote the return annotation when ``compute_logits`` quotes its own."""
    _, original = parse_method(libcst_code(compute_logits_text))
    returns = original.returns
    if returns is None or not isinstance(returns.annotation, cst.SimpleString) or method.returns is None:
        return method
    quote = returns.annotation.quote
    if not isinstance(method.returns.annotation, (cst.Attribute, cst.Name)):
        return method
    text = cst.Module(body=[]).code_for_node(method.returns.annotation)
    return method.with_changes(
        returns=method.returns.with_changes(annotation=cst.SimpleString(f"{quote}{text}{quote}"))
    )
