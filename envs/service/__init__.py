"""The env service: a gRPC server hosting desktops of this machine, its client (a Gymnasium-style env),
and the one episode loop (observation, policy, answer, step row) that rollout, eval and replays play through."""
