"""The workload runner: production-style benchmark runs against any Kafka-protocol broker.

    .venv/bin/python -m loadtest.runner loadtest/workloads/max-throughput-100b.toml \\
        --start-castle --compare mock --repeat 3

In the spirit of the OpenMessaging Benchmark and Kafka's perf tools: a workload file
(``workload.py``) says what to run; producers and consumers run as separate processes
(``producer.py``, ``consumer.py``) and report once a second on stdout; the runner
(``run.py``) starts them against a bootstrap address, samples the broker's CPU and memory
from /proc (``procstats.py``), merges the latency histograms (``histogram.py``) and writes
a JSON result; ``report.py`` turns results into charts and a Markdown table.
"""
