"""Errors that reach the user as one clear line and exit code 2."""

from __future__ import annotations


class UsageError(Exception):
    """Bad arguments or input: reported on stderr, exit 2, nothing written."""


class InternalError(Exception):
    """An unexpected failure, reported with the file being processed."""

    def __init__(self, file: str, cause: BaseException):
        super().__init__(f"internal error while processing {file}: {type(cause).__name__}: {cause}")
        self.file = file
        self.cause = cause

    def __reduce__(self):  # raised in a worker process, re-raised in the parent
        return type(self), (self.file, self.cause)


def no_drafter_found(root: object, heuristic: str) -> str:
    """Why a directory that is no vLLM tree gave nothing to audit (``heuristic``: what drafter-shaped means)."""
    return (
        f"{root}: no drafter found: no vllm/model_executor/models/registry.py, no register_model call and no "
        f"{heuristic}; give a vLLM checkout, a vllm package or a plugin's model directory"
    )
