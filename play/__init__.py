"""Playing: the agent loop and what drives it. `episode.py`, the one episode loop (observation → policy →
answer → step row, and the step reward rule); `trajectories.py`, many episodes at once over a pool of
desktops, journaled (rollout, eval); `async_loop.py`, async-rl's loop (the desktops playing while a trainer
trains); `scripted.py`, plays whose answers are written down (tasks build's replays, the benchmarks);
`config.py`, the playing stages' options (`PlayConfig`); `curriculum.py`, how RL draws its tasks;
`desktops_demo.py`, `just desktops-demo`. Above envs/ (the desktops, the service, the fleet), tasks/ and
policy/; below stages/."""
