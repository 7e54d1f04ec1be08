"""Importers: recorded HTTP traffic from files (HAR, mitmproxy flow files) as `HttpExchange`s.

Not responsible for decoding or storing: `storage.ingest` does both for every source.
"""
