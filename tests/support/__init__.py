"""Support code the tests share: PostgreSQL clusters, the plugin harness, queue and worker
helpers, and the scripts tests run as child processes."""
