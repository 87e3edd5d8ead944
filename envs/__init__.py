"""The environments, one room per idea:

- desktop/: one real desktop: its sandbox, X, the office and the other apps, the accessibility tree,
  the GUI actions, the jail evaluators run the agent's code in;
- service/: the env service over gRPC (server, client, proto) and the episode loop that plays it;
- fleet/: many env servers: backends (local, docker), the supervisor, the pool that leases desktops,
  the manifest, the web console;
- tasks/: OSWorld's task format: setup steps, getters, metrics, the generated suites, check and fetch.
"""
