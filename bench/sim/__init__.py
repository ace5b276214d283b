"""The fleet at scale on virtual time: many real Workers in one process (tests/support/fleet.py)
over the in-memory store and queue, with DynamoDB's costs and limits modelled at the store
port (dynamodb.py). `python -m bench --only sim` runs the scenarios (scenarios.py); the small
size is also a test of the simulation's own invariants (tests/unit/test_simulation.py).
docs/simulation.md says what is modelled, from which numbers, and what is not."""
