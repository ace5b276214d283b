"""The local development stack, written once: the backing services the demo, the tests, the
benchmarks and the chaos suite start on 127.0.0.1 (DynamoDB Local or moto for DynamoDB, moto
for SQS and CloudWatch), each a child process of the caller that ends with it.

Shipped because `wsfleet demo --backend aws` uses it; nothing here runs in production."""
