"""Flow-level model on SimGrid: the same topology files, routes and job traffic as the emulator,
simulated as max-min flows (up to ~10,000 hosts) instead of emulated packet by packet.

- `routes`: the controller's circuits and paths for the host pairs the traffic uses.
- `traffic`: one iteration as messages: the TF PS job (push, then pull) or a scheme's schedule.
- `engine`: SimGrid (CM02, exact max-min) in a subprocess per simulation; calibration hook.
- `simulate`: experiment file -> plan -> outcome, as `testbed simulate` prints it.
"""
