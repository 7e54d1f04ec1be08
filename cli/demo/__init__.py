"""`llmtap demo`: the whole job on a fresh machine, with no network and no API keys.

The simulated provider (`llmtap.simulator`) plays all five protocols on 127.0.0.1; the
real `llmtap proxy` runs in front of it; the official SDKs drive three teams' traffic
through it (`traffic.py`); then the reports and the dashboard (`run.py` and
`llmtap.cli.demo_command`).

Not responsible for simulating a provider: that is `llmtap.simulator`, which the demo
only starts.
"""
