"""``mtp-audit`` and ``python -m mtp_audit``: Ctrl-C is handled from the very first import."""

from __future__ import annotations

import gc


def main() -> None:
    # A command's objects live until it ends, and almost none is cyclic garbage (a cold scan of
    # vLLM 0.34.0 peaks at the same RSS with the collector off), yet the collector walks the
    # growing heap again and again: 0.1-0.2 s of CPU, a tenth of a cold scan. The process is
    # left without it; refcounting frees everything else, and verify's workers are new
    # interpreters with their own.
    gc.disable()
    from .lifecycle import Interrupted, handle_ctrl_c, interrupted, usable_stderr

    usable_stderr()
    handle_ctrl_c()
    try:
        from .cli import main as run
    except Interrupted:  # Ctrl-C while the command's modules import: as anywhere else
        interrupted()
    run()


if __name__ == "__main__":
    main()
