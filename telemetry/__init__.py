"""What the proxy tells the rest of a team's stack as it records: Prometheus metrics, one
OpenTelemetry span per exchange, and budgets (spend per team against a limit, alerts, and
the refusal of a team over its limit).

The counting and exporting run where the writer runs (its own process, off the relay
path), as observers of what each commit added (storage.writer.Observer); the proxy's side
holds only what must answer at once (the metrics endpoint, the budget gate).

Not responsible for decoding, storing or pricing records (protocols, storage, analytics
do; the rows arrive priced), nor for reports over history (analytics).
"""
