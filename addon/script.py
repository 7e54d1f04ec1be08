"""Entry point for `mitmdump -s addon/script.py --set llmtap_db=URL`: the llmtap recorder
as a plain mitmproxy script. `llmtap proxy` does the same with friendlier options."""

from llmtap.addon.recorder import Recorder

addons = [Recorder()]
