"""covflow_report: the HTML report of a covflowd run (docs/report.md).

    python3 -m covflow_report RUN.jsonl [--config FULL.yaml] [--frame SEQ] --out report.html

`covflow report` runs it with the installed package on PYTHONPATH and the run's configuration
resolved. The modules: results (reading the JSON Lines), setting (the configuration's budget,
grid, looks and truth), figures (matplotlib), page (the HTML).
"""
