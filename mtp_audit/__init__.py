"""mtp-audit: audit vLLM drafters for get_top_tokens() and write the missing method."""

__version__ = "0.1.0"
