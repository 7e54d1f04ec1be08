"""The lake: a fleet's history as Apache Iceberg tables (issue 17), written by
`llmtap lake sync` with pyiceberg and read back by reports with DuckDB's iceberg extension.

Not responsible for the store (storage) or for what reports compute (analytics).
"""
