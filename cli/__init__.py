"""The `llmtap` command line: one module per command, each a thin layer over the packages.

Not responsible for any decoding, storage or analysis itself.
"""
