"""The local stack: the real servers the product's demo and tests run against, on loopback, started by the project's
own scripts (Kafka in KRaft mode, two clusters; Google's pstest Pub/Sub emulator; our Pub/Sub Lite server; moto for
S3 and Kinesis; Apicurio; Pulsar; Prometheus; the Spark Connect server and a standalone cluster).

`stack.py` starts, stops and describes them; `fetch.py` downloads and builds what they need; `lite_server/` is the
Pub/Sub Lite server; `tls_proxy.py` a TLS front; `spark_servers.py` the Spark servers' command lines; `paths.py` where
downloads and state live; `demo.py` the demo's topics, subscriptions and traffic; `child_signals.py` children that
hear the SIGINT sent to them. Nothing a deployment runs imports it (tests/unit/test_import_rules.py); `bridgectl local
...` is its command line."""
