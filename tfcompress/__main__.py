"""``python -m tfcompress``."""

try:
    from tfcompress.cli import entry
except KeyboardInterrupt:  # Ctrl-C in the few milliseconds before entry() installs handlers
    import sys

    print("tfcompress: interrupted (SIGINT); nothing partial was left behind", file=sys.stderr)
    raise SystemExit(130) from None

entry()
