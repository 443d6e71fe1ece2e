"""``scan --format json``: the contract's document, on stdout."""

from __future__ import annotations

import json

from .. import __version__
from ..model import ScanResult


def render_json(result: ScanResult) -> str:
    document = {
        "tool": "mtp-audit",
        "tool_version": __version__,
        "root": str(result.tree.root),
        "vllm_version": result.tree.vllm_version,
        "drafters": [r.to_json() for r in result.records],
        "unresolved": [
            {"arch": u.arch, "module": u.module, "class": u.cls, "platforms": u.platforms, "reason": u.reason}
            for u in result.unresolved
        ],
        "errors": [{"file": f, "message": msg} for f, msg in result.parse_errors],
    }
    return json.dumps(document, indent=2)
