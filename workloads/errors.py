"""How a run ends early: shared by the TF job, the scheme engine's job, hardware mode and the
replays, so each can raise and catch them without importing the others."""


class RunError(RuntimeError):
    """A job process failed; the message names the host and its last log lines."""


class Unrecoverable(RuntimeError):
    """An event the run cannot go on after (a PS failed and no standby is left, the controller
    refused a reconfiguration); the message says what to change."""
