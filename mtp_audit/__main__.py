"""``mtp-audit`` and ``python -m mtp_audit``: Ctrl-C is handled from the very first import."""

from __future__ import annotations


def main() -> None:
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
