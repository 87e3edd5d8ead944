"""computerrl: train computer-use agents with online RL on real desktops."""

__version__ = "0.1.0"
