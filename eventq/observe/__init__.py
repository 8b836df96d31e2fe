"""Seeing the queue: live statistics, Prometheus metrics and the dashboard
(docs/architecture.md, "Metrics and the dashboard").

Pure modules (livestats, buckets, history, chart, pages) and thin adapters around them
(metrics: prometheus_client; web: aiohttp; joblog: the command log in Kafka).
"""
