"""Traffic, stores and harnesses that the tests and the benchmarks share: what both drive
the product with, so a test and the bench that measures the same thing build it alike.

- `corpus`: the recorded corpus's cases as HTTP exchanges; `har`: a big HAR made of them.
- `synthetic`: synthetic conversations as the writer's rows (`fill`, `Inserter`, `with_sessions`).
- `scratch`: a fresh PostgreSQL database per run, dropped afterwards.
- `fuzz_bodies`, `fuzz_checks`: hostile wire exchanges (hypothesis strategies);
  `resource_oracle`: what one costs to decode against what its size allows.
- `costly_requests`: requests whose records are legitimately costly to build.
- `proxy`: `llmtap proxy` in a child process; `fleet`: proxies that restart on their
  ports and spools, and the streaming clients that drive them.
- `network`: a free port, a TCP forwarder that can cut connections; `procfs`: a process
  tree's children and memory (`MemoryCeiling`); `peak_rss`: a command's own peak memory.

Editable installs only, like `llmtap.bench`: wheels leave it out, so nothing a user runs
(the CLI and the packages it composes) may import it, and it imports neither the CLI nor
the bench. Not responsible for measuring or printing figures (bench/ does) nor for any
assertion (the tests make them).
"""
