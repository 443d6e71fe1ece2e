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
