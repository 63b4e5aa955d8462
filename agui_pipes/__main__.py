"""``python -m agui_pipes`` is the ``agui-pipes`` command."""

from ._cli import main

raise SystemExit(main())
