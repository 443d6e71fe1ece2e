"""The import-time speed trick of classify.memo falls back where the interpreter lacks what it needs.

``.ci/interpreters`` runs a cold scan and fix on every Python 3.10-3.13 the machine has;
these tests check the trick itself on the interpreter running the suite, and its fallback.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

import pytest

from mtp_audit.classify import memo


def _libcst_shaped_dataclass():
    """A docstring-less dataclass made as if in a libcst module, inside the trick."""
    namespace = {"__module__": "libcst._probe", "__annotations__": {"value": int}}
    return dataclasses.dataclass(type("Matcher", (), namespace))


def test_libcst_dataclasses_still_build_under_the_trick():
    with memo._no_signature_docstrings():
        cls = _libcst_shaped_dataclass()
    assert cls(value=1).value == 1
    assert inspect.signature is memo.inspect.signature  # restored
    expected = "Matcher" if memo._dataclasses_tolerate_unsigned() else "Matcher(value: int)"
    assert cls.__doc__ == expected


def test_dataclasses_without_a_fallback_get_the_import_unchanged(monkeypatch):
    """Python 3.10 and Debian's 3.11.2: a signature that raises breaks @dataclass."""

    def process_class_without_fallback(cls, *args, **kwargs):
        cls.__doc__ = cls.__name__ + str(inspect.signature(cls))  # no try/except, as before 3.11.7
        return cls

    monkeypatch.setattr(dataclasses, "_process_class", process_class_without_fallback)
    memo._dataclasses_tolerate_unsigned.cache_clear()
    try:
        assert not memo._dataclasses_tolerate_unsigned()
        with memo._no_signature_docstrings():
            cls = _libcst_shaped_dataclass()
        assert cls.__doc__.startswith("Matcher(")
    finally:
        memo._dataclasses_tolerate_unsigned.cache_clear()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.10 lacks the fallback; 3.11 has it from 3.11.7")
def test_the_probe_finds_the_fallback_where_it_exists():
    assert memo._dataclasses_tolerate_unsigned()
