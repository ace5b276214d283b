"""wsfleet benchmarks (`make bench`, `python -m bench`): fleet latencies around faults, store
operations and DynamoDB units per connection-hour, per-worker capacity and ingest throughput.

Never imported by the product or by timed tests; results go to bench/out/ (JSON, PNG) and the
figures that matter are recorded by hand in bench/RESULTS.md.
"""
