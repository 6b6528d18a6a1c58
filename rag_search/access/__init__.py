"""Who may do what: users and their keys, wrong-key limits, TLS, the query log, the folder policy."""
