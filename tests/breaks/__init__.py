"""Graph breaks end to end: prefix graph, replacement code, resume functions, tracing APIs, logs."""
