"""The ``agui-pipes`` command line (agui_pipes._cli), as real processes or via ``main``."""
