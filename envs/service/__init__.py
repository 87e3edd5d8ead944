"""The env service: a gRPC server hosting desktops of this machine, and its client (a Gymnasium-style env)."""
