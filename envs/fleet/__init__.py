"""A fleet of env servers: the backends that start them (local processes, Docker hosts), the supervisor that
keeps them alive, the manifest that lists them, the pool that leases their desktops, and the web console."""
