"""Hypothesis strategies: compute_logits bodies built from the shapes vLLM uses, plus mutations.

Each generated case knows what it is made of, so a property can say what the
classification must be: a case that touches the logits after the head call,
computes them by hand, branches around the head or returns early must never
be mirrored.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

PREFIX = [
    'assert self.lm_head is not None, "lm_head is shared from the target"',
    "current_step_idx = spec_step_idx % self.num_mtp_layers",
    "layer = self.layers[str(self.mtp_start_layer_idx + current_step_idx)]",
    "hidden_states = self.norm(hidden_states)",
    "self.model.step = spec_step_idx",
    "# a comment before the head call",
]
HEADS = ["self.lm_head", "layer.shared_head.head", "lm_head"]
HIDDEN = ["hidden_states", "layer.shared_head(hidden_states)", "self.model.norm(hidden_states)"]
POST = {
    "mask": ["logits.index_fill_(1, self.banned, -float('inf'))", "logits[..., self.limit :] = -torch.inf"],
    "softcap": ["logits = self.cap * torch.tanh(logits / self.cap)"],
    "scatter": [
        "wide = logits.new_full((logits.shape[0], self.vocab), float('-inf'))",
        "wide[:, self.draft_id_to_target_id] = logits",
        "logits = wide",
    ],
    "other": ["logits = logits * 2"],
}


@dataclass
class Case:
    code: str
    head_kind: str  # "processor" or "delegate"
    post: list[str]
    breaking: str | None  # "conditional", "early_return", "by_hand" or None

    @property
    def must_be_manual(self) -> bool:
        return bool(self.post) or self.breaking is not None


@st.composite
def compute_logits_cases(draw) -> Case:
    with_step = draw(st.booleans())
    with_head_param = draw(st.booleans())
    params = ["self", "hidden_states: torch.Tensor"]
    if with_head_param:
        params.append("lm_head: nn.Module")
    if with_step:
        params.append("spec_step_idx: int = 0")
    prefix = draw(st.lists(st.sampled_from(PREFIX), max_size=3, unique=True))
    if any("spec_step_idx" in p for p in prefix) and not with_step:
        prefix = [p for p in prefix if "spec_step_idx" not in p]
    head_kind = draw(st.sampled_from(["processor", "delegate"]))
    if head_kind == "processor":
        head = draw(st.sampled_from([h for h in HEADS if with_head_param or h != "lm_head"]))
        call = f"self.logits_processor({head}, {draw(st.sampled_from(HIDDEN))})"
    else:
        args = ["hidden_states"] + (["spec_step_idx"] if with_step else [])
        call = f"self.model.compute_logits({', '.join(args)})"
    post_kinds = draw(st.lists(st.sampled_from(sorted(POST)), max_size=2, unique=True))
    post = [line for kind in post_kinds for line in POST[kind]]
    breaking = draw(st.sampled_from([None, None, None, "conditional", "early_return", "by_hand"]))
    body = list(prefix)
    if breaking == "early_return":
        body += ["if hidden_states is None:", "    return None"]
    if breaking == "conditional":
        body += ["if self.flag:", f"    logits = {call}", "else:", "    logits = hidden_states @ self.w.t()"]
    elif breaking == "by_hand":
        body += ["logits = torch.matmul(hidden_states, self.lm_head.weight.t())"]
    elif post or draw(st.booleans()):
        body += [f"logits = {call}"]
    else:
        body += [f"return {call}"]
    if not body[-1].startswith("return"):
        body += post + ["return logits"]
    docstring = ['"""Draft logits."""'] if draw(st.booleans()) else []
    lines = [f"def compute_logits({', '.join(params)}) -> torch.Tensor | None:"]
    lines += [f"    {line}" for line in docstring + body]
    return Case("\n".join(lines) + "\n", head_kind, post, breaking)
