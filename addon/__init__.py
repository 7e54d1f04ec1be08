"""mitmproxy glue: the recorder addon, its stream tee, attribution and `llmtap proxy`.

The only package that imports mitmproxy. Not responsible for decoding (protocols) or
storage (storage).
"""
