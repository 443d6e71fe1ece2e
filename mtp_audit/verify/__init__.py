"""verify: run the real vLLM code and compare get_top_tokens with compute_logits(...).argmax(-1)."""
