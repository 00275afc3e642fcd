"""streamgate's Grafana dashboards as code (``python -m grafana.generate``), their provisioning,
and the Prometheus rules they go with."""
